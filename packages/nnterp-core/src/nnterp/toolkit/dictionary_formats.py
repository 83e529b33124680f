"""Dictionaries from the files their trainers write: SAELens folders, Gemma Scope's ``params.npz``, sparsify's hookpoint folders.

Each loader gives a ``Dictionary`` whose ``encode`` / ``decode`` compute what
the format's own code computes, sited at standard values:

- SAELens (``cfg.json`` + ``sae_weights.safetensors``): the cfg's hook names
  (``Dictionary.from_saelens``; ``Dictionary.save`` writes one).
- Gemma Scope (``params.npz``: ``W_enc [d_in, d_sae]``, ``W_dec [d_sae, d_out]``,
  ``b_enc``, ``b_dec``, ``threshold``): a JumpReLU SAE or transcoder,
  ``JumpReLU(x @ W_enc + b_enc, threshold) @ W_dec + b_dec``. The file names no
  site, so the caller gives ``reads`` (and ``writes`` for a transcoder).
- EleutherAI's sparsify (a folder per hookpoint: ``cfg.json`` + ``sae.safetensors``,
  ``encoder.weight [num_latents, d_in]``, ``encoder.bias``, ``W_dec [num_latents, d_in]``,
  ``b_dec``, optionally ``W_skip``): a TopK SAE (``x - b_dec`` encoded) or
  transcoder (``x`` encoded). Its hookpoint is a module of the HuggingFace base
  model (``"layers.6"``, ``"h.6.mlp"``); ``sparsify_sites`` finds the standard
  value read at that module's output (and input, for a transcoder) on the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ..protocols import StandardModel
from . import _arguments
from . import _hooks as hooks
from .cache import _host, expand_names

if TYPE_CHECKING:
    from .dictionaries import Dictionary

__all__ = ["load_gemma_scope", "load_saelens", "load_sparsify", "save_saelens", "sparsify_sites"]

CFG_FILENAME = "cfg.json"
WEIGHTS_FILENAME = "sae_weights.safetensors"
#: the SAELens version whose cfg layout ``save`` writes (SAELens reads the version to pick the layout)
FORMAT_VERSION = "6.0.0"
#: the keys SAELens keeps under ``metadata`` (before 6.0 they sat at the top level of cfg.json)
METADATA_KEYS = (
    "model_name", "hook_name", "model_class_name", "hook_head_index", "model_from_pretrained_kwargs",
    "prepend_bos", "exclude_special_tokens", "neuronpedia_id", "context_size", "seqpos_slice",
    "dataset_path", "sae_lens_version", "sae_lens_training_version", "hook_name_out", "hook_head_index_out",
)  # fmt: skip

GEMMA_SCOPE_FILENAME = "params.npz"
#: what a Gemma Scope ``params.npz`` holds (some releases spell the matrices ``w_enc``, ``w_dec``)
GEMMA_SCOPE_KEYS = ("W_enc", "W_dec", "b_enc", "b_dec", "threshold")
SPARSIFY_WEIGHTS = "sae.safetensors"


def _dictionary() -> type:
    from .dictionaries import Dictionary

    return Dictionary


def _shape(tensor: Tensor) -> list[int]:
    return list(tensor.shape)


def _built(where: str, **fields: Any) -> Dictionary:
    """``Dictionary(**fields)``, its shape checks' ``ValueError`` naming the file they were read from."""
    try:
        return _dictionary()(**fields)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _checked_on(dictionary: Dictionary, model: StandardModel | None, function: str) -> Dictionary:
    """The dictionary, its sites checked on ``model`` where one is given (``Dictionary.sites``: widths, availability)."""
    if model is not None:
        dictionary.sites(model, function=function)
    return dictionary


# -- SAELens -----------------------------------------------------------------------


def load_saelens(
    path: str | Path,
    *,
    reads: str | None = None,
    writes: str | None = None,
    norm_scaling_factor: float | None = None,
    device: str | torch.device = "cpu",
) -> Dictionary:
    """Load a SAELens folder: ``cfg.json`` and ``sae_weights.safetensors`` (SAELens 6's layout, or an earlier one).

    Reads the architectures ``standard``, ``jumprelu``, ``topk``,
    ``transcoder``, ``jumprelu_transcoder`` and ``skip_transcoder`` (and a
    pre-6 ``standard`` with ``activation_fn: topk``). The sites are the
    cfg's ``hook_name`` (and ``hook_name_out``), unless ``reads`` /
    ``writes`` override them. ``normalize_activations:
    expected_average_only_in`` needs the dataset's ``norm_scaling_factor``,
    which is folded into the weights as SAELens does. What is not implemented
    is refused with a ValueError naming it: another architecture, a ``hook_z``
    reshape, a single head's SAE (``hook_head_index``), a fine-tuning scaling
    factor.
    """
    from safetensors.torch import load_file

    folder = Path(path)
    for name in (CFG_FILENAME, WEIGHTS_FILENAME):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder} has no {name}: a SAELens folder holds {CFG_FILENAME} and {WEIGHTS_FILENAME}"
            )
    cfg = json.loads((folder / CFG_FILENAME).read_text())
    weights = load_file(str(folder / WEIGHTS_FILENAME), device=str(device))
    return from_saelens_cfg(
        cfg, weights, reads=reads, writes=writes, norm_scaling_factor=norm_scaling_factor, where=str(folder)
    )


def from_saelens_cfg(
    cfg: dict[str, Any], weights: dict[str, Tensor], *, reads, writes, norm_scaling_factor, where: str
) -> Dictionary:
    """A dictionary from a SAELens cfg and its weights (what ``load_saelens`` read from ``where``)."""
    from .dictionaries import ARCHITECTURES, NORMALIZATIONS

    def refuse(problem: str) -> ValueError:
        return ValueError(f"{where}: {problem}")

    metadata = {key: cfg[key] for key in METADATA_KEYS if key in cfg}  # before SAELens 6
    metadata.update(cfg.get("metadata") or {})
    architecture = cfg.get("architecture", "standard")
    activation_fn = cfg.get("activation_fn", cfg.get("activation_fn_str"))
    k = cfg.get("k")
    if architecture == "standard" and activation_fn == "topk":
        architecture, k = "topk", (cfg.get("activation_fn_kwargs") or {}).get("k", k)
    elif activation_fn not in (None, "relu"):
        raise refuse(f"activation_fn {activation_fn!r} is not supported (relu, or topk on a standard SAE)")
    if architecture not in ARCHITECTURES:
        raise refuse(f"architecture {architecture!r} is not supported; this module reads {', '.join(ARCHITECTURES)}")
    activation, transcoder, skip = ARCHITECTURES[architecture]

    normalize = cfg.get("normalize_activations", "none")
    if isinstance(normalize, bool) or normalize is None:  # SAELens before 6 wrote a bool
        normalize = "expected_average_only_in" if normalize else "none"
    if normalize == "expected_average_only_in":
        if norm_scaling_factor is None:
            raise refuse(
                "normalize_activations is expected_average_only_in, which scales inputs by a factor estimated on the "
                "training data that the folder does not hold: pass norm_scaling_factor= (SAELens's pretrained "
                "directory lists it) to fold it into the weights"
            )
    elif norm_scaling_factor is not None:
        raise refuse(
            f"norm_scaling_factor is for expected_average_only_in SAEs; this one's normalize_activations is {normalize!r}"
        )
    elif normalize not in NORMALIZATIONS:
        raise refuse(
            f"normalize_activations {normalize!r} is not supported; "
            f"this module implements {', '.join(NORMALIZATIONS)} and expected_average_only_in"
        )
    hook_name = metadata.pop("hook_name", None) or metadata.pop("hook_point", None) or cfg.get("hook_point")
    reshape = cfg.get("reshape_activations") or ("hook_z" if "hook_z" in (hook_name or "") else "none")
    if reshape != "none":
        raise refuse(
            f"reshape_activations {reshape!r} (an SAE over flattened heads) is not supported: "
            "dictionaries read [batch, seq, d_in] values"
        )
    for head in ("hook_head_index", "hook_head_index_out"):
        if metadata.get(head) is not None:
            raise refuse(f"{head} {metadata[head]} makes this an SAE of one attention head, which is not supported")
    if cfg.get("finetuning_scaling_factor") or (
        "scaling_factor" in weights and not torch.all(weights["scaling_factor"] == 1)
    ):
        raise refuse("a finetuning scaling factor (an older SAELens option) is not supported")

    hook_name_out = metadata.pop("hook_name_out", None)
    reads = reads or hook_name
    if not reads:
        raise refuse("cfg.json names no hook_name: pass reads= (a standard name such as 'layers.3.layer_input')")
    if transcoder:
        writes = writes or hook_name_out
        if not writes:
            raise refuse(
                f"a {architecture} writes another value than it reads, and cfg.json names no hook_name_out: pass writes="
            )
    elif writes is not None:
        raise refuse(f"writes= is for transcoders; this folder holds a {architecture} SAE")

    if "threshold" not in weights and "log_threshold" in weights:
        weights["threshold"] = weights["log_threshold"].exp()
    needed = (
        ["W_enc", "W_dec", "b_enc", "b_dec"]
        + (["threshold"] if activation == "jumprelu" else [])
        + (["W_skip"] if skip else [])
    )
    missing = [name for name in needed if name not in weights]
    if missing:
        raise refuse(f"{WEIGHTS_FILENAME} lacks {', '.join(missing)}, which a {architecture} needs")
    d_in, d_sae = cfg.get("d_in"), cfg.get("d_sae")
    if (d_in, d_sae) != (None, None) and tuple(weights["W_enc"].shape) != (d_in, d_sae):
        raise refuse(f"W_enc is {_shape(weights['W_enc'])}, but cfg.json says d_in={d_in}, d_sae={d_sae}")
    W_enc, W_dec, b_dec = weights["W_enc"], weights["W_dec"], weights["b_dec"]
    if norm_scaling_factor is not None:
        # the SAE was trained on x * factor: fold the factor in, so it reads x itself
        W_enc, W_dec, b_dec = W_enc * norm_scaling_factor, W_dec / norm_scaling_factor, b_dec / norm_scaling_factor
        normalize = "none"
    metadata.pop("sae_lens_version", None)
    return _dictionary()(
        W_enc, W_dec, weights["b_enc"], b_dec, reads=reads, writes=writes if transcoder else None,
        activation=activation, k=int(k) if activation == "topk" and k is not None else None,
        threshold=weights.get("threshold") if activation == "jumprelu" else None,
        W_skip=weights.get("W_skip") if skip else None,
        apply_b_dec_to_input=bool(cfg.get("apply_b_dec_to_input", not transcoder)),
        normalize_activations=normalize,
        rescale_acts_by_decoder_norm=bool(cfg.get("rescale_acts_by_decoder_norm", False)),
        metadata=metadata,
    )  # fmt: skip


def save_saelens(dictionary: Dictionary, path: str | Path) -> Path:
    """Write ``dictionary`` as a SAELens 6 folder (``cfg.json``, ``sae_weights.safetensors``); the folder's path.

    ``hook_name`` (and ``hook_name_out``) are ``reads`` (and ``writes``) as
    given; ``load_saelens`` loads the folder back equal.
    """
    from safetensors.torch import save_file

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = {
        "architecture": dictionary.architecture,
        "d_in": dictionary.d_in,
        "d_sae": dictionary.d_sae,
        "dtype": str(dictionary.W_enc.dtype).removeprefix("torch."),
        "device": "cpu",
        "apply_b_dec_to_input": dictionary.apply_b_dec_to_input,
        "normalize_activations": dictionary.normalize_activations,
        "reshape_activations": "none",
    }
    if dictionary.activation == "topk":
        cfg.update(k=dictionary.k, rescale_acts_by_decoder_norm=dictionary.rescale_acts_by_decoder_norm)
    if dictionary.is_transcoder:
        cfg["d_out"] = dictionary.d_out
    where = {"hook_name": dictionary.reads} | ({"hook_name_out": dictionary.writes} if dictionary.is_transcoder else {})
    cfg["metadata"] = {**dictionary.metadata, **where, "sae_lens_version": FORMAT_VERSION}
    tensors = {
        "W_enc": dictionary.W_enc,
        "W_dec": dictionary.W_dec,
        "b_enc": dictionary.b_enc,
        "b_dec": dictionary.b_dec,
    }
    if dictionary.threshold is not None:
        tensors["threshold"] = dictionary.threshold
    if dictionary.W_skip is not None:
        tensors["W_skip"] = dictionary.W_skip
    save_file(
        {name: tensor.detach().cpu().contiguous() for name, tensor in tensors.items()}, str(folder / WEIGHTS_FILENAME)
    )
    (folder / CFG_FILENAME).write_text(json.dumps(cfg, indent=2))
    return folder


# -- Gemma Scope ---------------------------------------------------------------------


def load_gemma_scope(
    path: str | Path,
    *,
    reads: str,
    writes: str | None = None,
    model: StandardModel | None = None,
    device: str | torch.device = "cpu",
) -> Dictionary:
    """Load a Gemma Scope ``params.npz`` (the file, or the folder holding it): a JumpReLU SAE, or transcoder with ``writes``.

    ``encode(x) = JumpReLU(x @ W_enc + b_enc)``, zero where the pre-activation
    is not above ``threshold``, and ``decode(f) = f @ W_dec + b_dec``: Gemma
    Scope's own formula (no ``b_dec`` subtracted from the input). The file
    names no site: ``reads`` is the standard value it was trained on
    (``"layers.12.layer_output"`` for the residual stream after block 12,
    ``"layers.12.mlp.mlp_output"`` for an MLP's output), ``writes`` the value a
    transcoder writes (its ``reads`` then being ``"layers.12.mlp_norm_output"``).
    With ``model``, the sites are checked on it now (their widths against
    ``d_in`` / ``d_out``). A missing key, tensors whose shapes disagree, or a
    fine-tuning ``scaling_factor`` other than 1 are a ValueError naming the file.
    """
    import numpy as np

    file = Path(path)
    if file.is_dir():
        file = file / GEMMA_SCOPE_FILENAME
    if not file.is_file():
        raise FileNotFoundError(
            f"{file} does not exist: give a Gemma Scope {GEMMA_SCOPE_FILENAME}, or the folder holding it"
        )
    with np.load(file) as archive:
        # some releases write w_enc / w_dec (SAELens's loader renames them the same way)
        arrays = {("W_" + key[2:] if key.startswith("w_") else key): archive[key] for key in archive.files}
    missing = [key for key in GEMMA_SCOPE_KEYS if key not in arrays]
    if missing:
        raise ValueError(
            f"{file}: lacks {', '.join(missing)}; a Gemma Scope {GEMMA_SCOPE_FILENAME} holds {', '.join(GEMMA_SCOPE_KEYS)} "
            f"(this one holds {', '.join(sorted(arrays)) or 'nothing'})"
        )
    weights = {key: torch.from_numpy(arrays[key]).to(device) for key in arrays}
    scaling = weights.pop("scaling_factor", None)
    if scaling is not None and not torch.all(scaling == 1):
        raise ValueError(f"{file}: a fine-tuning scaling_factor other than 1 is not supported")
    dictionary = _built(
        str(file),
        W_enc=weights["W_enc"], W_dec=weights["W_dec"], b_enc=weights["b_enc"], b_dec=weights["b_dec"],
        reads=reads, writes=writes, activation="jumprelu", threshold=weights["threshold"],
        metadata={"format": "gemma_scope"},
    )  # fmt: skip
    return _checked_on(dictionary, model, "Dictionary.from_gemma_scope")


# -- sparsify ------------------------------------------------------------------------


def load_sparsify(
    path: str | Path,
    model: StandardModel | None = None,
    *,
    hookpoint: str | None = None,
    reads: str | None = None,
    writes: str | None = None,
    device: str | torch.device = "cpu",
) -> Dictionary:
    """Load one of EleutherAI sparsify's sparse coders: a hookpoint's folder (``cfg.json``, ``sae.safetensors``).

    ``path`` is the hookpoint's folder, or the folder of a whole run with
    ``hookpoint=`` naming the subfolder. A TopK SAE encodes
    ``TopK(ReLU((x - b_dec) @ encoder.weight.T + encoder.bias))`` and decodes
    ``f @ W_dec + b_dec``; a transcoder (``transcode: true``) encodes ``x``
    itself and adds ``x @ W_skip.T`` where it has a skip connection. The sites
    are the standard values at the hookpoint's module on ``model``
    (``sparsify_sites``: an SAE reads and writes its output, a transcoder reads
    its input and writes its output), unless ``reads`` (``writes``) name them;
    without those, ``model`` is needed. The folder name is the hookpoint
    (``"layers.6"``, ``"layers.6.mlp"``) unless ``hookpoint`` says it. The
    ``groupmax`` activation, and a skip connection on an SAE, are refused.
    """
    from safetensors.torch import load_file

    folder = Path(path)
    if hookpoint is not None and not (folder / CFG_FILENAME).is_file():
        folder = folder / hookpoint
    if not (folder / CFG_FILENAME).is_file():
        inside = (
            sorted(child.name for child in folder.iterdir() if (child / CFG_FILENAME).is_file())
            if folder.is_dir()
            else []
        )
        fix = (
            f"pass hookpoint= one of {', '.join(inside)}"
            if inside
            else f"give a sparsify hookpoint folder ({CFG_FILENAME}, {SPARSIFY_WEIGHTS})"
        )
        raise FileNotFoundError(f"{folder} has no {CFG_FILENAME}; {fix}")
    if not (folder / SPARSIFY_WEIGHTS).is_file():
        raise FileNotFoundError(
            f"{folder} has no {SPARSIFY_WEIGHTS}: a sparsify hookpoint folder holds {CFG_FILENAME} and {SPARSIFY_WEIGHTS}"
        )
    where = str(folder)
    cfg = json.loads((folder / CFG_FILENAME).read_text())
    weights = load_file(str(folder / SPARSIFY_WEIGHTS), device=str(device))
    activation = cfg.get("activation", "topk")
    if activation != "topk":
        raise ValueError(f"{where}: activation {activation!r} is not supported (sparsify's topk is)")
    transcoder = bool(cfg.get("transcode", False))
    skip = bool(cfg.get("skip_connection", False))
    if skip and not transcoder:
        raise ValueError(
            f"{where}: a skip connection on an autoencoder (transcode: false) is not supported: it writes x @ W_skip.T into the value it reads"
        )
    needed = ["encoder.weight", "encoder.bias", "W_dec", "b_dec"] + (["W_skip"] if skip else [])
    missing = [name for name in needed if name not in weights]
    if missing:
        raise ValueError(
            f"{where}: {SPARSIFY_WEIGHTS} lacks {', '.join(missing)} (it holds {', '.join(sorted(weights))})"
        )
    encoder = weights["encoder.weight"]
    if encoder.ndim != 2:
        raise ValueError(f"{where}: encoder.weight is {_shape(encoder)}, not [num_latents, d_in]")
    d_in, num_latents = cfg.get("d_in"), cfg.get("num_latents") or None
    if (d_in is not None and encoder.shape[1] != d_in) or (num_latents is not None and encoder.shape[0] != num_latents):
        raise ValueError(
            f"{where}: encoder.weight is {_shape(encoder)}, but cfg.json says [num_latents={num_latents}, d_in={d_in}]"
        )
    if "k" not in cfg:
        raise ValueError(f"{where}: cfg.json gives no k, the number of latents a topk coder keeps")
    name = hookpoint or folder.name
    if reads is None or (transcoder and writes is None):
        if model is None:
            raise ValueError(
                f"{where}: the sites of hookpoint {name!r} are found on the model: pass the model "
                "(Dictionary.from_sparsify(path, model)), or reads="
                + (" and writes=" if transcoder else "")
                + " as standard names"
            )
        found_reads, found_writes = sparsify_sites(model, name, transcoder=transcoder)
        reads = reads or found_reads
        writes = writes or found_writes
    if not transcoder:
        writes = writes if writes not in (None, reads) else None
        if writes is not None:
            raise ValueError(f"{where}: writes= is for transcoders (transcode: true); this is an autoencoder")
    dictionary = _built(
        where,
        W_enc=encoder.T, W_dec=weights["W_dec"], b_enc=weights["encoder.bias"], b_dec=weights["b_dec"],
        reads=reads, writes=writes, activation="topk", k=int(cfg["k"]), W_skip=weights.get("W_skip") if skip else None,
        apply_b_dec_to_input=not transcoder, metadata={"format": "sparsify", "hookpoint": name},
    )  # fmt: skip
    return _checked_on(dictionary, model, "Dictionary.from_sparsify")


def sparsify_sites(model: StandardModel, hookpoint: str, *, transcoder: bool = False) -> tuple[str, str | None]:
    """The standard values at a sparsify hookpoint on ``model``: ``(reads, writes)``, ``writes`` None for an SAE.

    A hookpoint is a module of the HuggingFace base model (``"layers.6"``,
    ``"layers.6.mlp"``, ``"h.6"`` on GPT-2) whose output an SAE reads (a
    transcoder reads its first input and writes its output). The value is the
    standard one read at that module as it is (``layer_output`` at a block,
    ``mlp.mlp_output`` at an MLP whose output the block adds, ``mlp_input`` at
    an MLP's input). A hookpoint whose tensor no standard value holds (Gemma 2's
    ``mlp``, whose output the block norms before adding it) is a ValueError
    naming what the module's values are read at, and the fix.
    """
    _arguments.loaded(model)
    base = getattr(model._module, "base_model", model._module)
    try:
        module = base.get_submodule(hookpoint)
    except AttributeError:
        raise ValueError(
            f"hookpoint {hookpoint!r} names no module of {type(base).__name__} (sparsify's hookpoints are its "
            "named_modules(), e.g. 'layers.6' or 'layers.6.mlp'): load the coder trained on this model, or pass reads="
        ) from None
    located = _located(model)
    outputs = [name for name, where in located if where.module is module and _at_output(where)]
    inputs = [name for name, where in located if where.module is module and _at_input(where)]
    kind = type(module).__name__
    if not outputs:
        raise ValueError(
            f"hookpoint {hookpoint!r} ({kind}): no standard value is what this module returns on this model"
            + (f" (what it is called with is {', '.join(inputs)})" if inputs else "")
            + "; pass reads= (and writes=) the standard value the coder was trained on (model.support() lists them)"
        )
    if transcoder and not inputs:
        raise ValueError(
            f"hookpoint {hookpoint!r} ({kind}): no standard value is what this module is called with on this model; "
            "pass reads= the standard value the transcoder reads"
        )
    # the value nearest the module: the last read at its input, the first at its output
    return (inputs[-1], outputs[0]) if transcoder else (outputs[0], None)


def _located(model: StandardModel) -> list[tuple[str, hooks.Boundary]]:
    """Every value this checkpoint serves that is read at a module boundary as it is, in forward order, with the boundary."""
    found = []
    for name in expand_names(model, "*"):
        where = hooks.boundary(*_host(model, name))
        if not isinstance(where, str):
            found.append((name, where))
    return found


def _selected(where: hooks.Boundary) -> Any:
    select = where.descriptor.select
    return select(where.host) if callable(select) else select


def _at_output(where: hooks.Boundary) -> bool:
    """Whether the value is the module's output, or its first element (what sparsify hooks)."""
    return where.last == "output" and _selected(where) in (None, 0)


def _at_input(where: hooks.Boundary) -> bool:
    """Whether the value is the module's first positional input (what sparsify's transcoders read)."""
    return where.last == "input" or (where.last == "inputs" and _selected(where) == 0)
