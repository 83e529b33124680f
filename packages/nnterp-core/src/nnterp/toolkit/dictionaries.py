"""Sparse dictionaries on standard values: SAEs and transcoders, spliced into traces (loaded by ``dictionary_formats``).

A ``Dictionary`` encodes the value it ``reads`` into ``d_sae`` sparse feature
activations and decodes them into the value it ``writes``: the same value for a
sparse autoencoder (``"layers.3.layer_input"``), another for a transcoder
(reads ``"layers.3.mlp_input"``, writes ``"layers.3.mlp.mlp_output"``). Sites
are standard names, or TransformerLens hook names (``"blocks.3.hook_resid_pre"``)
resolved through ``nnterp.toolkit.names``, so one dictionary file runs on every
family with no per-family code::

    sae = Dictionary.from_saelens("path/to/sae")            # cfg.json + sae_weights.safetensors
    sae = Dictionary.from_gemma_scope("params.npz", reads="layers.12.layer_output")
    sae = Dictionary.from_sparsify("run/layers.6", model)    # the hookpoint's standard value on the model
    acts = feature_activations(model, sae, prompts)          # [batch, seq, d_sae]
    logits = ablate_features(model, sae, prompts, [12, 40])  # the rest of the value untouched
    report = evaluate_dictionary(model, sae, prompts)        # MSE, variance explained, L0, CE loss recovered

Inside a trace, ``splice(model, sae, edit=..., keep_error=...)`` puts the
(edited) reconstruction in place of the value; the prompt-level functions are
built on it; they run without gradients and return CPU tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import nnsight
import torch
from torch import Tensor
from tqdm.auto import tqdm

from .. import layouts
from ..descriptors import declared_values
from ..errors import InvalidArgument
from . import _arguments
from ._arguments import Batch
from .cache import _host, expand_names

__all__ = [
    "Dictionary",
    "DictionaryEvaluation",
    "ablate_features",
    "evaluate_dictionary",
    "feature_activations",
    "run_with_dictionary",
    "set_features",
    "splice",
    "steer_features",
]

ACTIVATIONS = ("relu", "jumprelu", "topk")
NORMALIZATIONS = ("none", "constant_norm_rescale", "layer_norm")
#: SAELens's architectures this module reads: (activation, transcoder, with a skip connection)
ARCHITECTURES = {
    "standard": ("relu", False, False),
    "jumprelu": ("jumprelu", False, False),
    "topk": ("topk", False, False),
    "transcoder": ("relu", True, False),
    "jumprelu_transcoder": ("jumprelu", True, False),
    "skip_transcoder": ("relu", True, True),
}
_LN_EPS = 1e-5

#: strings or token ids, as ``_arguments.prompts`` reads them (a tensor, id lists, the tokenizer's encoding)
Prompts = str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]] | Tensor | Any
Index = int | Sequence[int] | slice | Tensor | None


# -- the dictionary ----------------------------------------------------------------


@dataclass(eq=False, repr=False)
class Dictionary:
    """A sparse autoencoder or transcoder: ``[..., d_in]`` values to ``[..., d_sae]`` features to ``[..., d_out]`` values.

    ``encode(x) = activation(normalize(x) - b_dec * apply_b_dec_to_input) @ W_enc + b_enc)``
    and ``decode(f) = denormalize(f @ W_dec + b_dec)``, SAELens's conventions:
    ``W_enc`` is ``[d_in, d_sae]``, ``W_dec`` ``[d_sae, d_out]``, ``b_enc``
    ``[d_sae]``, ``b_dec`` ``[d_out]``; row ``i`` of ``W_dec`` is feature ``i``'s
    direction. ``activation`` is ``"relu"``, ``"jumprelu"`` (ReLU, zero where
    the pre-activation is not above ``threshold`` ``[d_sae]``) or ``"topk"``
    (ReLU of the ``k`` largest pre-activations, zero elsewhere; with
    ``rescale_acts_by_decoder_norm`` the pre-activations are ranked times the
    decoder rows' norms, and decoded divided by them).

    ``reads`` names the value encoded and ``writes`` the value decoded into
    (None: the same, an SAE; a name: a transcoder, ``d_out`` may differ and
    ``W_skip`` ``[d_out, d_in]`` adds ``x @ W_skip.T`` to its output).
    ``normalize_activations``: ``"none"``, ``"constant_norm_rescale"`` (x scaled
    to norm ``sqrt(d_in)``, the output scaled back) or ``"layer_norm"`` (x
    centred and divided by its std + 1e-5, the output multiplied back); a
    transcoder's output is not scaled back, as in SAELens. ``metadata`` keeps
    the rest of a loaded cfg (``model_name`` ...), written back by ``save``.
    """

    W_enc: Tensor
    W_dec: Tensor
    b_enc: Tensor
    b_dec: Tensor
    reads: str
    writes: str | None = None
    activation: str = "relu"
    k: int | None = None
    threshold: Tensor | None = None
    W_skip: Tensor | None = None
    apply_b_dec_to_input: bool = False
    normalize_activations: str = "none"
    rescale_acts_by_decoder_norm: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.W_enc.ndim != 2 or self.W_dec.ndim != 2:
            raise ValueError(
                f"W_enc and W_dec must be matrices, [d_in, d_sae] and [d_sae, d_out]; got {_shape(self.W_enc)} and {_shape(self.W_dec)}"
            )
        d_in, d_sae = self.W_enc.shape
        d_out = self.W_dec.shape[1]
        expected = {"W_dec": (self.W_dec, (d_sae, d_out)), "b_enc": (self.b_enc, (d_sae,)), "b_dec": (self.b_dec, (d_out,))}
        if self.threshold is not None:
            expected["threshold"] = (self.threshold, (d_sae,))
        if self.W_skip is not None:
            expected["W_skip"] = (self.W_skip, (d_out, d_in))
        for name, (tensor, shape) in expected.items():
            if tuple(tensor.shape) != shape:
                raise ValueError(
                    f"{name} is {_shape(tensor)}, but W_enc [d_in={d_in}, d_sae={d_sae}] and "
                    f"W_dec [d_sae, d_out={d_out}] make it {list(shape)}"
                )
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} is not one of {', '.join(ACTIVATIONS)}")
        if self.activation == "jumprelu" and self.threshold is None:
            raise ValueError("a jumprelu dictionary needs threshold= [d_sae]")
        if self.activation == "topk" and not (isinstance(self.k, int) and 0 < self.k <= d_sae):
            raise ValueError(f"a topk dictionary needs k= an int from 1 to d_sae={d_sae}, not {self.k!r}")
        if self.rescale_acts_by_decoder_norm and self.activation != "topk":
            raise ValueError("rescale_acts_by_decoder_norm ranks top-k pre-activations: it needs activation='topk'")
        if self.normalize_activations not in NORMALIZATIONS:
            raise ValueError(f"normalize_activations {self.normalize_activations!r} is not one of {', '.join(NORMALIZATIONS)}")
        if self.writes is None:
            if d_out != d_in:
                raise ValueError(
                    f"an SAE decodes into the value it reads, so d_out ({d_out}) must equal d_in ({d_in}); give writes= for a transcoder"
                )
            if self.W_skip is not None:
                raise ValueError("W_skip is a transcoder's skip connection: give writes= too")
        elif self.apply_b_dec_to_input:
            raise ValueError("apply_b_dec_to_input subtracts the output bias from the input: a transcoder cannot (b_dec is its output's)")
        self._moved: dict[tuple, Dictionary] = {}

    # -- sizes and kind ----------------------------------------------------------

    @property
    def d_in(self) -> int:
        return self.W_enc.shape[0]

    @property
    def d_sae(self) -> int:
        return self.W_enc.shape[1]

    @property
    def d_out(self) -> int:
        return self.W_dec.shape[1]

    @property
    def is_transcoder(self) -> bool:
        return self.writes is not None

    @property
    def architecture(self) -> str:
        """The SAELens architecture name (``"standard"``, ``"topk"``, ``"jumprelu_transcoder"`` ...); ValueError if SAELens has none."""
        kind = (self.activation, self.is_transcoder, self.W_skip is not None)
        for name, spec in ARCHITECTURES.items():
            if spec == kind:
                return name
        what = f"{self.activation} {'transcoder' if self.is_transcoder else 'SAE'}{' with a skip connection' if kind[2] else ''}"
        raise ValueError(f"SAELens has no architecture for a {what}")

    def __repr__(self) -> str:
        kind = "transcoder" if self.is_transcoder else "SAE"
        where = f"reads={self.reads!r}" + (f", writes={self.writes!r}" if self.is_transcoder else "")
        extra = f", k={self.k}" if self.activation == "topk" else ""
        return f"Dictionary({kind}, {self.activation}{extra}, d_in={self.d_in}, d_sae={self.d_sae}, d_out={self.d_out}, {where})"

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> Dictionary:
        """A copy with every tensor on ``device`` and floating ones in ``dtype`` (None keeps each)."""

        def move(tensor: Tensor | None) -> Tensor | None:
            return None if tensor is None else tensor.to(device=device, dtype=dtype if tensor.is_floating_point() else None)

        return replace(self, **{name: move(getattr(self, name)) for name in ("W_enc", "W_dec", "b_enc", "b_dec", "threshold", "W_skip")})

    def _on(self, device: torch.device) -> Dictionary:
        """This dictionary on ``device``, the copy kept for the next call."""
        if self.W_enc.device == device:
            return self
        key = (str(device),)
        if key not in self._moved:
            self._moved[key] = self.to(device)
        return self._moved[key]

    # -- on tensors --------------------------------------------------------------

    def encode(self, x: Tensor) -> Tensor:
        """Feature activations of ``x``: ``[..., d_in]`` to ``[..., d_sae]``, in the dictionary's dtype."""
        self._check_width(x, self.d_in, "encode", "d_in")
        sae_in = self._normalize(x.to(self.W_enc.dtype))
        if self.apply_b_dec_to_input:
            sae_in = sae_in - self.b_dec
        pre = sae_in @ self.W_enc + self.b_enc
        if self.activation == "relu":
            return pre.relu()
        if self.activation == "jumprelu":
            return pre.relu() * (pre > self.threshold)
        if self.rescale_acts_by_decoder_norm:
            pre = pre * self.W_dec.norm(dim=-1)
        values, indices = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter_(-1, indices, values.relu())

    def decode(self, features: Tensor, x: Tensor | None = None) -> Tensor:
        """The value ``features`` reconstruct: ``[..., d_sae]`` to ``[..., d_out]`` (no skip connection).

        ``x`` is the input they were encoded from: an SAE that normalizes its
        input needs it to scale the output back (ValueError without it).
        """
        self._check_width(features, self.d_sae, "decode", "d_sae")
        features = features.to(self.W_dec.dtype)
        if self.rescale_acts_by_decoder_norm:
            features = features / self.W_dec.norm(dim=-1)
        out = features @ self.W_dec + self.b_dec
        if self.normalize_activations == "none" or self.is_transcoder:
            return out
        if x is None:
            raise ValueError(
                f"this SAE normalizes its input ({self.normalize_activations}): "
                "decode(features, x) needs the input x to scale the output back"
            )
        x = x.to(self.W_enc.dtype)
        if self.normalize_activations == "constant_norm_rescale":
            return out * x.norm(dim=-1, keepdim=True) / math.sqrt(self.d_in)
        mean = x.mean(dim=-1, keepdim=True)
        return out * (x - mean).std(dim=-1, keepdim=True) + mean

    def forward(self, x: Tensor) -> Tensor:
        """The dictionary's output for ``x``: ``decode(encode(x), x)``, plus ``x @ W_skip.T`` where it has a skip; ``[..., d_out]``."""
        return self._output(self.encode(x), x)

    __call__ = forward

    def _output(self, features: Tensor, x: Tensor) -> Tensor:
        """``decode(features, x)`` plus the skip connection's ``x @ W_skip.T``: what ``forward`` gives for these features."""
        out = self.decode(features, x)
        if self.W_skip is not None:
            out = out + x.to(self.W_skip.dtype) @ self.W_skip.T
        return out

    def _normalize(self, x: Tensor) -> Tensor:
        if self.normalize_activations == "constant_norm_rescale":
            return x * (math.sqrt(self.d_in) / x.norm(dim=-1, keepdim=True))
        if self.normalize_activations == "layer_norm":
            centred = x - x.mean(dim=-1, keepdim=True)
            return centred / (centred.std(dim=-1, keepdim=True) + _LN_EPS)
        return x

    @staticmethod
    def _check_width(tensor: Tensor, width: int, what: str, axis: str) -> None:
        if tensor.ndim == 0 or tensor.shape[-1] != width:
            raise ValueError(f"{what} takes [..., {axis}={width}] tensors, got {_shape(tensor)}")

    # -- from and to SAELens folders --------------------------------------------

    @classmethod
    def from_tensors(
        cls,
        W_enc: Tensor,
        W_dec: Tensor,
        b_enc: Tensor | None = None,
        b_dec: Tensor | None = None,
        *,
        reads: str,
        writes: str | None = None,
        **options: Any,
    ) -> Dictionary:
        """A dictionary from its weights: ``W_enc`` ``[d_in, d_sae]``, ``W_dec`` ``[d_sae, d_out]``, biases zero when omitted.

        ``options`` are the other fields (``activation``, ``k``, ``threshold``,
        ``W_skip``, ``apply_b_dec_to_input``, ``normalize_activations`` ...).
        The tensors are detached, not copied.
        """
        b_enc = torch.zeros(W_enc.shape[1], dtype=W_enc.dtype, device=W_enc.device) if b_enc is None else b_enc
        b_dec = torch.zeros(W_dec.shape[1], dtype=W_dec.dtype, device=W_dec.device) if b_dec is None else b_dec
        options = {name: value.detach() if isinstance(value, Tensor) else value for name, value in options.items()}
        return cls(W_enc.detach(), W_dec.detach(), b_enc.detach(), b_dec.detach(), reads=reads, writes=writes, **options)

    @classmethod
    def from_saelens(
        cls,
        path: str | Path,
        *,
        reads: str | None = None,
        writes: str | None = None,
        norm_scaling_factor: float | None = None,
        device: str | torch.device = "cpu",
    ) -> Dictionary:
        """Load a SAELens folder (``cfg.json``, ``sae_weights.safetensors``): ``dictionary_formats.load_saelens``."""
        from .dictionary_formats import load_saelens

        return load_saelens(path, reads=reads, writes=writes, norm_scaling_factor=norm_scaling_factor, device=device)

    @classmethod
    def from_gemma_scope(
        cls, path: str | Path, *, reads: str, writes: str | None = None, model: Any = None, device: str | torch.device = "cpu"
    ) -> Dictionary:
        """Load a Gemma Scope ``params.npz`` (a JumpReLU SAE, or transcoder with ``writes``) at ``reads``: ``dictionary_formats.load_gemma_scope``."""
        from .dictionary_formats import load_gemma_scope

        return load_gemma_scope(path, reads=reads, writes=writes, model=model, device=device)

    @classmethod
    def from_sparsify(
        cls,
        path: str | Path,
        model: Any = None,
        *,
        hookpoint: str | None = None,
        reads: str | None = None,
        writes: str | None = None,
        device: str | torch.device = "cpu",
    ) -> Dictionary:
        """Load an EleutherAI sparsify hookpoint folder (a TopK SAE or transcoder), sited on ``model``: ``dictionary_formats.load_sparsify``."""
        from .dictionary_formats import load_sparsify

        return load_sparsify(path, model, hookpoint=hookpoint, reads=reads, writes=writes, device=device)

    def save(self, path: str | Path) -> Path:
        """Write this dictionary as a SAELens 6 folder (``cfg.json``, ``sae_weights.safetensors``); the folder's path.

        ``hook_name`` (and ``hook_name_out``) are ``reads`` (and ``writes``) as
        given; ``from_saelens`` loads the folder back equal.
        """
        from .dictionary_formats import save_saelens

        return save_saelens(self, path)

    # -- on a model ----------------------------------------------------------------

    def sites(self, model: Any, *, function: str = "Dictionary.sites") -> tuple[str, str]:
        """The standard names this dictionary reads and writes on ``model``, checked before anything runs.

        TransformerLens names resolve through ``nnterp.toolkit.names``. Raises
        ``KeyError`` for a name that is no value of the model (a block past the
        model's, naming how many it has), ``Unavailable`` for one this
        checkpoint lacks, ``InvalidArgument`` (of ``function``'s ``dictionary``)
        where a value's width is not ``d_in`` (``d_out``) or it has no
        ``[batch, seq, width]`` layout, and ``ValueError`` where a transcoder
        writes before it reads.
        """
        reads = _standard(model, self.reads)
        writes = reads if self.writes is None else _standard(model, self.writes)
        _check_site(model, self, reads, "d_in", "reads", function)
        if writes != reads:
            _check_site(model, self, writes, "d_out", "writes", function)
            if expand_names(model, [reads, writes])[0] != reads:
                raise ValueError(f"this transcoder writes {writes}, which the forward computes before {reads}, the value it reads")
        return reads, writes


def _shape(tensor: Tensor) -> list[int]:
    return list(tensor.shape)


def _standard(model: Any, name: str) -> str:
    """A site as one standard name: standard names as they are, TransformerLens names through ``names.standard_name``."""
    root = name.split(".", 1)[0]
    if root != "layers" and name not in declared_values(type(model)):
        try:
            from .names import standard_name
        except ImportError:
            raise ValueError(
                f"{name!r} is no standard name, and nnterp.toolkit.names (which translates TransformerLens hook names) "
                "is not installed: give the site as a standard name, e.g. 'layers.3.layer_input'"
            ) from None
        name = standard_name(model, name)
    expanded = expand_names(model, name)  # KeyError / Unavailable for a value the model lacks
    if len(expanded) != 1:
        raise ValueError(f"{name!r} names {len(expanded)} values; a dictionary reads one (no '*')")
    return expanded[0]


def _check_site(model: Any, dictionary: Dictionary, site: str, axis: str, role: str, function: str) -> None:
    """The value at ``site`` is ``[batch, seq, width]``, ``width`` the dictionary's ``axis`` (``d_in``, ``d_out``)."""
    host, value = _host(model, site)
    layout = getattr(type(host), value).layout
    if layout is None:
        return
    width = getattr(dictionary, axis)
    dims = layouts.dims(layout)
    shape = layouts.expected_shape(host, layout, None)
    if dims[:2] != (layouts.BATCH, layouts.SEQ) or len(dims) != 3:
        raise InvalidArgument(
            function,
            "dictionary",
            dictionary,
            f"the dictionary {role} {site}, laid out [{', '.join(dims)}]; a dictionary {role} [batch, seq, {axis}] values",
            f"give {role}= a value laid out [batch, seq, width]",
        )
    if shape[-1] is not None and shape[-1] != width:
        raise InvalidArgument(
            function,
            "dictionary",
            dictionary,
            f"the dictionary {role} {site}, which is {dims[-1]}={shape[-1]} wide on this model, but its {axis} is {width}",
            "load the dictionary trained on this model's value",
        )


# -- inside a trace ----------------------------------------------------------------


def splice(
    model: Any,
    dictionary: Dictionary,
    *,
    edit: Callable[[Tensor], Tensor | None] | None = None,
    keep_error: bool = False,
) -> Tensor:
    """Put the dictionary's reconstruction in place of the value it writes; call it inside a trace. The features, ``[batch, seq, d_sae]``.

    Reads the value the dictionary ``reads`` (x), encodes it, lets
    ``edit(features)`` change the features (in place, or by returning new
    ones), and writes ``forward`` of the edited features into the value it
    ``writes``. With ``keep_error=True`` (the error-node convention) the
    written value is ``value + decode(edited) - decode(features)``: the
    reconstruction error is kept, so only the edit changes the model, and
    without an edit the value is written back unchanged, exactly.
    Call it before reading anything the write changes; outside a trace it is
    refused (``ToolkitInsideTrace``). ``edit`` must keep the features'
    shape (``InvalidArgument`` otherwise).
    """
    _arguments.inside_trace("splice")
    reads, writes = dictionary.sites(model, function="splice")
    reader, read_name = _host(model, reads)
    x = getattr(reader, read_name)
    local = dictionary._on(x.device)
    features = local.encode(x)
    edited = features
    if edit is not None:
        edited = features.clone()
        returned = edit(edited)
        edited = edited if returned is None else returned
        if not isinstance(edited, Tensor) or edited.shape != features.shape:
            raise InvalidArgument(
                "splice",
                "edit",
                edit,
                f"it returned {_described(edited)}, where the features are [{', '.join(map(str, features.shape))}] "
                f"([batch, seq, d_sae={dictionary.d_sae}])",
                "edit the features in place (returning None), or return a tensor of their shape",
            )
    writer, write_name = _host(model, writes)
    target = x if writes == reads else getattr(writer, write_name)
    if keep_error:
        new = target + (local.decode(edited, x) - local.decode(features, x)).to(target.dtype)
    else:
        new = local._output(edited, x)
    setattr(writer, write_name, new.to(target.dtype))
    return edited


def _described(value: Any) -> str:
    return f"a tensor of shape [{', '.join(map(str, value.shape))}]" if isinstance(value, Tensor) else f"a {type(value).__name__}"


def _where(positions: Index, batch: Batch, function: str) -> slice | Tensor:
    """``positions`` on the batch's left-padded sequence axis (None: all), negative from the end; out of range refused."""
    if positions is None:
        return slice(None)
    chosen = _arguments.positions(positions, batch.input_ids.shape[1], function=function)
    return torch.tensor(list(dict.fromkeys(chosen)), dtype=torch.long)


def _feature_index(dictionary: Dictionary, features: Index, function: str) -> Tensor:
    """``features`` as indices of the dictionary's ``d_sae`` features, negative from the end; out of range refused."""
    expected = f"expected an int or a list of ints, indices of the dictionary's d_sae={dictionary.d_sae} features"
    if isinstance(features, Tensor):
        if features.is_floating_point() or features.dtype == torch.bool:
            raise InvalidArgument(function, "features", features, expected)
        features = features.reshape(-1).tolist()
    if isinstance(features, bool) or isinstance(features, (str, bytes, float)):
        raise InvalidArgument(function, "features", features, expected)
    items = [features] if hasattr(features, "__index__") else list(features) if hasattr(features, "__iter__") else None
    if items is None or any(isinstance(item, bool) or not hasattr(item, "__index__") for item in items):
        raise InvalidArgument(function, "features", features, expected)
    if not items:
        raise InvalidArgument(function, "features", features, "no features chosen", "give at least one feature index")
    outside = [int(item) for item in items if not -dictionary.d_sae <= int(item) < dictionary.d_sae]
    if outside:
        raise InvalidArgument(
            function,
            "features",
            features,
            f"{outside} out of range: the dictionary has d_sae={dictionary.d_sae} features, "
            f"indices 0 to {dictionary.d_sae - 1} (or -{dictionary.d_sae} to -1 from the end)",
            "pick features of this dictionary",
        )
    return torch.tensor([int(item) % dictionary.d_sae for item in items], dtype=torch.long)


# -- over prompts ------------------------------------------------------------------


def _prompts(model: Any, prompts: Prompts, function: str) -> Batch:
    """The prompts as one left-padded ``Batch`` (strings or token ids; ``_arguments.prompts``), after the call's own checks."""
    return _arguments.prompts(model, prompts, function=function)


@torch.no_grad()
def run_with_dictionary(
    model: Any,
    dictionary: Dictionary,
    prompts: Prompts,
    *,
    edit: Callable[[Tensor], Tensor | None] | None = None,
    keep_error: bool = False,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` of a run with the dictionary spliced in (``splice``'s ``edit`` and ``keep_error``).

    Without ``keep_error`` the model runs on the reconstruction itself (its
    error changes the logits too); with it, only ``edit`` does. One trace;
    prompts (strings or token ids) are left-padded, whatever side the
    tokenizer pads, so position ``-1`` is every prompt's last token.
    """
    function = "run_with_dictionary"
    _arguments.outside_trace(function)
    dictionary.sites(model, function=function)
    return _spliced(model, dictionary, _prompts(model, prompts, function), edit, keep_error, remote)


def _spliced(model: Any, dictionary: Dictionary, batch: Batch, edit: Any, keep_error: bool, remote: bool | str) -> Tensor:
    """The logits of one trace of ``batch`` with the dictionary spliced in (``splice``'s ``edit`` and ``keep_error``)."""
    out: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
        nnsight.save(out)
        splice(model, dictionary, edit=edit, keep_error=keep_error)
        out.append(model.logits.detach().cpu())
    return out[0]


def ablate_features(
    model: Any,
    dictionary: Dictionary,
    prompts: Prompts,
    features: int | Sequence[int],
    *,
    positions: Index = None,
    keep_error: bool = True,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` with ``features`` set to zero at ``positions`` (all by default).

    With ``keep_error`` (the default) nothing else changes: on a dictionary
    without input normalization the value loses exactly
    ``sum_i f_i * W_dec[i]`` of the ablated features.
    """
    return _set(model, dictionary, prompts, features, 0.0, positions, keep_error, remote, "ablate_features")


def set_features(
    model: Any,
    dictionary: Dictionary,
    prompts: Prompts,
    features: int | Sequence[int],
    value: float | Tensor,
    *,
    positions: Index = None,
    keep_error: bool = True,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` with ``features``' activations set to ``value`` at ``positions`` (all by default).

    ``value`` is a number, or a tensor broadcastable to the selected
    ``[batch, positions, len(features)]`` activations. ``positions`` index the
    left-padded sequence axis (an int, a list, a slice; negative from the end;
    ``-1`` is every prompt's last token).
    """
    return _set(model, dictionary, prompts, features, value, positions, keep_error, remote, "set_features")


def _set(model: Any, dictionary: Dictionary, prompts: Prompts, features: Any, value: Any, positions: Index, keep_error: bool, remote: Any, function: str) -> Tensor:
    """``set_features`` (and ``ablate_features``, ``value`` 0), every argument checked before the trace."""
    _arguments.outside_trace(function)
    dictionary.sites(model, function=function)
    chosen = _feature_index(dictionary, features, function)
    batch = _prompts(model, prompts, function)
    where = _where(positions, batch, function)
    selected = (len(batch), batch.input_ids.shape[1] if isinstance(where, slice) else len(where), len(chosen))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            fits = torch.broadcast_shapes(torch.as_tensor(value).shape, selected) == selected
        except (RuntimeError, TypeError, ValueError):
            fits = False
        if not fits:
            raise InvalidArgument(
                function,
                "value",
                value,
                f"expected a number or a tensor broadcastable to the selected activations, "
                f"[batch, positions, features] = {list(selected)}",
                "give one value, one per feature ([features]), or one per position and feature",
            )

    def edit(acts: Tensor) -> None:
        rows = acts[:, where]
        rows[..., chosen.to(acts.device)] = torch.as_tensor(value, dtype=acts.dtype, device=acts.device)
        acts[:, where] = rows

    return _spliced(model, dictionary, batch, edit, keep_error, remote)


@torch.no_grad()
def steer_features(
    model: Any,
    dictionary: Dictionary,
    prompts: Prompts,
    features: int | Sequence[int],
    coefficient: float | Sequence[float] = 1.0,
    *,
    positions: Index = None,
    remote: bool | str = False,
) -> Tensor:
    """The logits ``[batch, seq, vocab_size]`` with ``coefficient * W_dec[feature]`` added to the value the dictionary writes.

    One coefficient for all ``features`` or one each; at ``positions`` (all
    by default). Nothing is encoded: the decoder rows are added as they are
    (in the normalized units, for a dictionary that normalizes its input).
    """
    function = "steer_features"
    _arguments.outside_trace(function)
    _, writes = dictionary.sites(model, function=function)
    chosen = _feature_index(dictionary, features, function)
    try:
        coefficients = torch.as_tensor(coefficient, dtype=dictionary.W_dec.dtype).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        coefficients = None
    if coefficients is None or len(coefficients) not in (1, len(chosen)):
        raise InvalidArgument(
            function,
            "coefficient",
            coefficient,
            f"{len(chosen)} features chosen; expected one number, or one per feature",
            "give a float, or a list as long as features",
        )
    batch = _prompts(model, prompts, function)
    where = _where(positions, batch, function)
    direction = (coefficients.to(dictionary.W_dec.device)[:, None] * dictionary.W_dec[chosen.to(dictionary.W_dec.device)]).sum(0)
    out: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
        nnsight.save(out)
        writer, name = _host(model, writes)
        value = getattr(writer, name)
        steered = value.clone()
        steered[:, where] += direction.to(device=value.device, dtype=value.dtype)
        setattr(writer, name, steered)
        out.append(model.logits.detach().cpu())
    return out[0]


def _batches(batch: Batch, batch_size: int) -> list[dict[str, Tensor]]:
    """The left-padded prompts (one length), ``batch_size`` at a time, as a trace's inputs."""
    return [batch[start : start + batch_size].inputs for start in range(0, len(batch), batch_size)]


@torch.no_grad()
def feature_activations(
    model: Any,
    dictionary: Dictionary,
    prompts: Prompts,
    *,
    features: int | Sequence[int] | None = None,
    batch_size: int = 8,
    progress: bool = True,
    remote: bool | str = False,
) -> Tensor:
    """The dictionary's feature activations on each prompt, ``[batch, seq, d_sae]`` (``[..., len(features)]`` with ``features``).

    Encodes the value the dictionary reads, in the trace (on the model's
    device), batch by batch; each forward stops once the value is read.
    Prompts (strings or token ids) are left-padded to the longest one,
    whatever side the tokenizer pads, padding positions included: a prompt's
    real tokens are its last ones, and position ``-1`` its last token.
    """
    function = "feature_activations"
    _arguments.outside_trace(function)
    batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
    reads, _ = dictionary.sites(model, function=function)
    chosen = None if features is None else _feature_index(dictionary, features, function)
    batches = _batches(_prompts(model, prompts, function), batch_size)
    parts: list[Tensor] = []
    for batch in tqdm(batches, desc=function, disable=not progress):
        out: list[Tensor] = []
        with _arguments.left_padding(model), model.trace(batch, remote=remote) as tracer:
            nnsight.save(out)
            reader, name = _host(model, reads)
            x = getattr(reader, name)
            acts = dictionary._on(x.device).encode(x)
            if chosen is not None:
                acts = acts[..., chosen.to(acts.device)]
            out.append(acts.cpu())
            tracer.stop()
        parts.append(out[0])
    return torch.cat(parts)


# -- evaluation --------------------------------------------------------------------


@dataclass(frozen=True)
class DictionaryEvaluation:
    """How well a dictionary reconstructs its value on a set of prompts, and what splicing it in costs the model.

    Over the real (non-padding) tokens: ``mse`` is the mean over tokens and
    ``d_out`` of ``(forward(x) - value)**2``; ``explained_variance`` is
    ``1 - sum ||value - forward(x)||^2 / sum ||value - mean||^2`` (the mean over
    all tokens); ``l0`` the mean number of active (non-zero) features per
    token. The losses are the mean next-token cross-entropy over the
    positions whose token and next token are both real: ``clean_loss`` of the
    plain model, ``spliced_loss`` with ``forward(x)`` in place of the value
    (no error term), ``ablated_loss`` with the value replaced by zeros or by
    its mean (``ablation``). ``tokens`` and ``predictions`` count both sets.
    """

    mse: float
    explained_variance: float
    l0: float
    clean_loss: float
    spliced_loss: float
    ablated_loss: float
    ablation: str
    tokens: int
    predictions: int

    @property
    def ce_loss_recovered(self) -> float:
        """``(ablated_loss - spliced_loss) / (ablated_loss - clean_loss)``: 1 when splicing costs nothing, 0 as bad as ablating."""
        gap = self.ablated_loss - self.clean_loss
        if gap == 0:
            raise ValueError("ablating the value leaves the loss unchanged, so the loss recovered has no gap to measure against")
        return (self.ablated_loss - self.spliced_loss) / gap

    @property
    def ce_loss_increase(self) -> float:
        """``spliced_loss - clean_loss``: what splicing the reconstruction in costs, in nats per token."""
        return self.spliced_loss - self.clean_loss


def _next_token_loss(logits: Tensor, batch: dict[str, Tensor]) -> Tensor:
    """The summed next-token cross-entropy and the number of predictions, ``[2]`` (float64), over positions whose token and next are real."""
    ids = batch["input_ids"].to(logits.device)
    mask = batch["attention_mask"].to(logits.device).bool()
    scored = mask[:, :-1] & mask[:, 1:]
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].float().flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
    return torch.stack([losses[scored.flatten()].double().sum(), scored.sum().double()]).cpu()


@torch.no_grad()
def evaluate_dictionary(
    model: Any,
    dictionary: Dictionary,
    prompts: Prompts,
    *,
    ablation: str = "zero",
    batch_size: int = 8,
    progress: bool = True,
    remote: bool | str = False,
) -> DictionaryEvaluation:
    """Reconstruction error, sparsity and the next-token loss with the dictionary spliced in, on ``prompts``: a ``DictionaryEvaluation``.

    Per batch: one clean trace (the value, its reconstruction, the clean
    loss), one with ``forward(x)`` written in place of the value; then one
    per batch with the value ablated (``ablation="zero"``, or ``"mean"``: the
    value's mean over every real token of the prompts). ``ce_loss_recovered``
    compares the three losses.
    """
    function = "evaluate_dictionary"
    _arguments.outside_trace(function)
    if ablation not in ("zero", "mean"):
        raise InvalidArgument(function, "ablation", ablation, "expected 'zero' or 'mean'")
    batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
    reads, writes = dictionary.sites(model, function=function)
    batches = _batches(_prompts(model, prompts, function), batch_size)
    bar = tqdm(total=3 * len(batches), desc="evaluate_dictionary", disable=not progress)
    totals = torch.zeros(4, dtype=torch.float64)  # squared error, active features, tokens, squared value norms
    value_sum = torch.zeros(dictionary.d_out, dtype=torch.float64)
    clean = torch.zeros(2, dtype=torch.float64)
    spliced = torch.zeros(2, dtype=torch.float64)
    for batch in batches:
        out: list[Tensor] = []
        with _arguments.left_padding(model), model.trace(batch, remote=remote):
            nnsight.save(out)
            reader, read_name = _host(model, reads)
            x = getattr(reader, read_name)
            writer, write_name = _host(model, writes)
            target = x if writes == reads else getattr(writer, write_name)
            local = dictionary._on(x.device)
            features = local.encode(x)
            recon = local._output(features, x)
            real = batch["attention_mask"].to(x.device).bool()
            value = target.to(recon.dtype)[real].double()
            error = (recon[real].double() - value).pow(2).sum()
            active = (features[real] != 0).sum().double()
            out.append(torch.stack([error, active, real.sum().double(), value.pow(2).sum()]).cpu())
            out.append(value.sum(0).cpu())
            out.append(_next_token_loss(model.logits, batch))
        totals += out[0]
        value_sum += out[1]
        clean += out[2]
        bar.update()
        spliced += _loss_with(model, batch, remote, lambda: splice(model, dictionary))
        bar.update()
    tokens = int(totals[2])
    mean = value_sum / tokens
    ablated = torch.zeros(2, dtype=torch.float64)
    for batch in batches:
        ablated += _loss_with(model, batch, remote, lambda: _ablate(model, writes, mean if ablation == "mean" else None))
        bar.update()
    bar.close()
    variance = totals[3] - tokens * mean.pow(2).sum()
    return DictionaryEvaluation(
        mse=float(totals[0] / (tokens * dictionary.d_out)),
        explained_variance=float(1 - totals[0] / variance),
        l0=float(totals[1] / tokens),
        clean_loss=float(clean[0] / clean[1]),
        spliced_loss=float(spliced[0] / spliced[1]),
        ablated_loss=float(ablated[0] / ablated[1]),
        ablation=ablation,
        tokens=tokens,
        predictions=int(clean[1]),
    )


def _loss_with(model: Any, batch: dict[str, Tensor], remote: bool | str, intervene: Callable[[], Any]) -> Tensor:
    """The summed next-token loss and the prediction count of one trace of ``batch`` under ``intervene()``."""
    out: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch, remote=remote):
        nnsight.save(out)
        intervene()
        out.append(_next_token_loss(model.logits, batch))
    return out[0]


def _ablate(model: Any, site: str, mean: Tensor | None) -> None:
    """Write zeros (or ``mean`` at every position) in place of ``site``; inside a trace."""
    host, name = _host(model, site)
    value = getattr(host, name)
    replaced = torch.zeros_like(value) if mean is None else mean.to(device=value.device, dtype=value.dtype).expand_as(value).clone()
    setattr(host, name, replaced)
