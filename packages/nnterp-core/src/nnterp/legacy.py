"""nnterp 1.3's names on ``StandardizedTransformer``: thin accessors over the standard values, each warning once with its replacement.

``model.layers_output[i]`` reads and writes ``model.layers[i].layer_output``,
``attentions_output[i]`` ``layers[i].self_attn.attention_output``, and so on
(``NAMES`` lists them all). The first use of a name in a process warns
``LegacyName``, a ``FutureWarning`` (shown by default, wherever the call is),
naming the replacement; later uses are silent. A 1.3 value that meant
something else on some families serves the standard meaning, and its warning
says where the meaning changed (``CHANGED``; docs/migrating.md has the table
and the evidence, ``examples/nnterp13/meaning_changes.py``).

``nnterp13`` hooks this onto the class: it adds the names the class lacks and
lets ``steer``, ``skip_layers`` and the constructor take 1.3's spellings
(``steering_vector=``, ``skip_with=``, ``enable_attention_probs=`` ...).
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any

from torch import Tensor

__all__ = ["CHANGED", "NAMES", "LegacyName", "nnterp13", "warn_once"]


class LegacyName(FutureWarning):
    """A name nnterp 1.3 served, still served for now; the message names what replaces it."""


#: 1.3's name -> what replaces it (shown in the warning and in docs/migrating.md)
NAMES: dict[str, str] = {
    "layers_input": "model.layers[i].layer_input",
    "layers_output": "model.layers[i].layer_output",
    "attentions": "model.layers[i].self_attn",
    "attentions_input": "model.layers[i].attention_norm_output",
    "attentions_output": "model.layers[i].self_attn.attention_output",
    "mlps": "model.layers[i].mlp",
    "mlps_input": "model.layers[i].mlp_input",
    "mlps_output": "model.layers[i].mlp.mlp_output",
    "attention_probabilities": "model.layers[i].self_attn.attention_probabilities (load with attn_implementation='eager')",
    "token_embeddings": "model.embed_tokens.output",
    "ln_final": "model.norm",
    "next_token_probs": "model.logits[:, -1].softmax(-1) inside a trace, or nnterp.toolkit.next_token_probs(model, prompts)",
    "input_ids": 'model.inputs[1]["input_ids"]',
    "attention_mask": 'model.inputs[1]["attention_mask"]',
    "input_size": 'model.inputs[1]["input_ids"].shape',
    "attn_probs_available": 'model.support()["self_attn.attention_probabilities"] is None',
    "detect_layer_output_type": "nothing: layer_output is a tensor on every family",
    "skip_layer": "model.skip_layers(layer, layer, with_) or nnterp.toolkit.skip_layers",
    "get_topk_closest_tokens": "model.project_on_vocab(h).softmax(-1).topk(k) (nnterp.toolkit.topk_closest_tokens ranks by cosine similarity instead)",
    "probs_to_dict": "dict(zip(model.tokenizer.convert_ids_to_tokens(ids), probs.tolist()))",
    "add_prefix_false_tokenizer": "nnterp.toolkit.Prompt.from_strings(..., both_spacings=True), which finds both spellings of a target",
}

#: 1.3 names whose standard replacement means something else on some families, and where (from examples/nnterp13/meaning_changes.py)
CHANGED: dict[str, str] = {
    "attentions_output": (
        "1.3 served the attention module's own output: on BLOOM and DBRX (whose modules add the residual) the stream "
        "layer_mid, on sandwich-norm and scaled-residual families (Gemma 2/3/4, OLMo 2/3, GLM-4, Granite, MiniCPM3 ...) "
        "the output before the post-norm or the scale; attention_output is what the block adds to the stream"
    ),
    "mlps_output": (
        "1.3 served the MLP module's own output: on BLOOM and MPT (whose MLPs add the residual) the stream layer_output, "
        "on sandwich-norm and scaled-residual families (Gemma 2/3/4, OLMo 2/3, GLM-4, Granite, MiniCPM3 ...) the output "
        "before the post-norm or the scale; mlp_output is what the block adds to the stream"
    ),
    "attentions_input": "1.3 served norm_attn_norm's input on DBRX, the stream layer_input; attention_norm_output is what the attention reads",
}

_warned: set[str] = set()


def warn_once(name: str, replacement: str, *, stacklevel: int = 3) -> None:
    """Warn ``LegacyName`` the first time ``name`` is used in this process, naming ``replacement``."""
    if name in _warned:
        return
    _warned.add(name)
    message = f"{name} is nnterp 1.3's name: use {replacement}"
    key = name.split("(")[0].split("[")[0].removeprefix("model.")
    if key in CHANGED:
        message += f". Its meaning changed on some families: {CHANGED[key]}"
    warnings.warn(message + " (docs/migrating.md)", LegacyName, stacklevel=stacklevel)


def _use(name: str) -> None:
    warn_once(f"model.{name}", NAMES[name], stacklevel=4)


# -- per-layer accessors ---------------------------------------------------------------


class LayerValues:
    """1.3's ``model.<name>[i]``: reads and writes ``layers[i].<path>`` (``path`` empty: the block itself, ``attentions``/``mlps``: a module)."""

    def __init__(self, model: Any, name: str, path: str, module: bool = False) -> None:
        self._model, self._name, self._path, self._module = model, name, path.split("."), module

    def _owner(self, layer: int) -> Any:
        owner = self._model.layers[layer]
        for part in self._path[:-1]:
            owner = getattr(owner, part)
        return owner

    def __getitem__(self, layer: int) -> Any:
        return getattr(self._owner(layer), self._path[-1])

    def __setitem__(self, layer: int, value: Any) -> None:
        if self._module:
            raise TypeError(
                f"model.{self._name}[{layer}] is a module, which cannot be assigned; assign one of its values ({NAMES[self._name]}.<value>)"
            )
        setattr(self._owner(layer), self._path[-1], value)

    def __call__(self, layer: int) -> Any:
        return self[layer]

    def __len__(self) -> int:
        return len(self._model.layers)

    def __repr__(self) -> str:
        return f"<nnterp 1.3's model.{self._name}: {NAMES[self._name]}>"


def _layer_values(name: str, path: str, module: bool = False) -> property:
    def get(self: Any) -> LayerValues:
        _use(name)
        return LayerValues(self, name, path, module)

    get.__doc__ = f"nnterp 1.3's ``{name}[i]``: ``{NAMES[name]}``."
    return property(get)


# -- the names, as a mixin -------------------------------------------------------------


class Nnterp13Names:
    """The names 1.3's ``StandardizedTransformer`` served that the standard one lacks; ``nnterp13`` copies them onto it."""

    if TYPE_CHECKING:  # what the class they are copied onto serves, which the names read
        embed_tokens: Any
        norm: Any
        logits: Any
        inputs: Any
        tokenizer: Any
        hidden_size: int

        def support(self, layer: int | None = None) -> dict[str, Any]: ...
        def project_on_vocab(self, hidden: Tensor) -> Tensor: ...

    layers_input = _layer_values("layers_input", "layer_input")
    layers_output = _layer_values("layers_output", "layer_output")
    attentions = _layer_values("attentions", "self_attn", module=True)
    attentions_input = _layer_values("attentions_input", "attention_norm_output")
    attentions_output = _layer_values("attentions_output", "self_attn.attention_output")
    mlps = _layer_values("mlps", "mlp", module=True)
    mlps_input = _layer_values("mlps_input", "mlp_input")
    mlps_output = _layer_values("mlps_output", "mlp.mlp_output")
    attention_probabilities = _layer_values("attention_probabilities", "self_attn.attention_probabilities")

    @property
    def token_embeddings(self) -> Any:
        """nnterp 1.3's ``token_embeddings``: the embedding module's output, ``model.embed_tokens.output``."""
        _use("token_embeddings")
        return self.embed_tokens.output

    @token_embeddings.setter
    def token_embeddings(self, value: Any) -> None:
        _use("token_embeddings")
        self.embed_tokens.output = value

    @property
    def ln_final(self) -> Any:
        """nnterp 1.3's ``ln_final``: the final norm, ``model.norm``."""
        _use("ln_final")
        return self.norm

    @property
    def next_token_probs(self) -> Any:
        """nnterp 1.3's ``next_token_probs``, inside a trace: ``model.logits[:, -1].softmax(-1)``, ``[batch, vocab_size]``."""
        _use("next_token_probs")
        return self.logits[:, -1, :].softmax(-1)

    @property
    def input_ids(self) -> Any:
        """nnterp 1.3's ``input_ids``, inside a trace: the batch's token ids."""
        _use("input_ids")
        return self.inputs[1]["input_ids"]

    @property
    def attention_mask(self) -> Any:
        """nnterp 1.3's ``attention_mask``, inside a trace."""
        _use("attention_mask")
        return self.inputs[1]["attention_mask"]

    @property
    def input_size(self) -> Any:
        """nnterp 1.3's ``input_size``, inside a trace: ``(batch, seq)``."""
        _use("input_size")
        return self.inputs[1]["input_ids"].shape

    @property
    def attn_probs_available(self) -> bool:
        """nnterp 1.3's ``attn_probs_available``: whether every block serves ``self_attn.attention_probabilities``."""
        _use("attn_probs_available")
        return self.support().get("self_attn.attention_probabilities") is None

    @property
    def add_prefix_false_tokenizer(self) -> Any:
        """nnterp 1.3's ``add_prefix_false_tokenizer``: the tokenizer loaded again with ``add_prefix_space=False``."""
        from transformers import AutoTokenizer

        _use("add_prefix_false_tokenizer")
        if "_nnterp13_tokenizer" not in self.__dict__:
            self.__dict__["_nnterp13_tokenizer"] = AutoTokenizer.from_pretrained(
                self.tokenizer.name_or_path, add_prefix_space=False
            )
        return self.__dict__["_nnterp13_tokenizer"]

    def detect_layer_output_type(self) -> None:
        """nnterp 1.3's ``detect_layer_output_type()``: nothing to detect, ``layer_output`` is a tensor on every family."""
        _use("detect_layer_output_type")

    def skip_layer(self, layer: int, skip_with: Tensor | None = None) -> None:
        """nnterp 1.3's ``skip_layer(layer, skip_with)``: ``model.skip_layers(layer, layer, skip_with)``."""
        _use("skip_layer")
        from .toolkit.steering import skip_layers

        model: Any = self  # the standardized model this mixin is on
        skip_layers(model, layer, layer, skip_with)

    def probs_to_dict(self, tokens: Tensor, probs: Tensor) -> dict[str, float]:
        """nnterp 1.3's ``probs_to_dict``: ``{token string: probability}`` for matching ``tokens`` and ``probs``."""
        _use("probs_to_dict")
        return {token: prob.item() for token, prob in zip(self.tokenizer.convert_ids_to_tokens(tokens), probs)}

    def get_topk_closest_tokens(self, hidden_state: Tensor, k: int = 5) -> Any:
        """nnterp 1.3's ``get_topk_closest_tokens``: the ``k`` likeliest tokens of ``softmax(project_on_vocab(hidden_state))``.

        ``hidden_state`` is ``[hidden_size]`` (a dict ``{token: probability}``)
        or ``[batch, hidden_size]`` (a list of them), as in 1.3.
        """
        _use("get_topk_closest_tokens")
        if hidden_state.shape[-1] != self.hidden_size or hidden_state.ndim not in (1, 2):
            raise ValueError(
                f"get_topk_closest_tokens: hidden_state is {tuple(hidden_state.shape)}, expected [{self.hidden_size}] or [batch, {self.hidden_size}]"
            )
        top = self.project_on_vocab(hidden_state).float().softmax(-1).topk(k, dim=-1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LegacyName)
            if hidden_state.ndim == 1:
                return self.probs_to_dict(top.indices, top.values)
            return [self.probs_to_dict(top.indices[i], top.values[i]) for i in range(hidden_state.shape[0])]


# -- 1.3's spellings of the arguments ----------------------------------------------------------

#: 1.3 constructor arguments that no longer do anything, and why
DROPPED = {
    "check_renaming": "a family is proven by the conformance kit, and at load where it is inferred (verify=True asks for it)",
    "allow_dispatch": "nothing at load needs the weights",
    "check_attn_probs_with_trace": "attention_probabilities is proven by the conformance kit",
    "allow_multimodal": "a multimodal wrapper is served through its text family",
    "remote": "pass remote=True to model.trace(...) or to each toolkit function; nnterp's classes travel to NDIF by name, so the server needs the same nnterp",
}


def _init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, model: Any, *args: Any, **kwargs: Any) -> None:
        if "rename_config" in kwargs:
            raise TypeError(
                "rename_config= is nnterp 1.3's renaming, which StandardizedTransformer no longer takes: give rename={old: new} "
                "for module names, or write a Family for the architecture (docs/adding-a-family.md)"
            )
        if kwargs.pop("enable_attention_probs", False):
            warn_once("StandardizedTransformer(enable_attention_probs=True)", "attn_implementation='eager'")
            if kwargs.setdefault("attn_implementation", "eager") != "eager":
                raise ValueError(
                    f"enable_attention_probs=True needs attn_implementation='eager', not {kwargs['attn_implementation']!r}: give one of them"
                )
        for name, why in DROPPED.items():
            if name in kwargs:
                kwargs.pop(name)
                warn_once(f"StandardizedTransformer({name}=)", f"nothing ({why})")
        original(self, model, *args, **kwargs)

    return __init__


def _steer(original: Any) -> Any:
    @functools.wraps(original)
    def steer(
        self: Any,
        layers: Any,
        vector: Tensor | None = None,
        factor: float = 1.0,
        positions: Any = None,
        *,
        token_positions: Any = None,
        batch_index: Any = None,
        steering_vector: Tensor | None = None,
    ) -> None:
        if steering_vector is not None:
            warn_once("model.steer(steering_vector=)", "model.steer(layers, vector, factor)")
            if vector is not None:
                raise TypeError("steer: give vector= or 1.3's steering_vector=, not both")
            vector = steering_vector
        if vector is None:
            raise TypeError("steer: missing the steering vector (vector=)")
        if positions is not None:
            warn_once("model.steer(positions=)", "model.steer(..., token_positions=)")
            if token_positions is not None:
                raise TypeError("steer: give token_positions= or 1.3's positions=, not both")
            token_positions = positions
        original(self, layers, vector, factor, token_positions=token_positions, batch_index=batch_index)

    return steer


def _skip_layers(original: Any) -> Any:
    @functools.wraps(original)
    def skip_layers(self: Any, start: Any = None, end: Any = None, with_: Tensor | None = None, **legacy: Any) -> None:
        spelled = {"start_layer": "start", "end_layer": "end", "skip_with": "with_"}
        unknown = set(legacy) - set(spelled) - {"layer_returns_tuple"}
        if unknown:
            raise TypeError(f"skip_layers() got unexpected keyword arguments {sorted(unknown)}")
        if legacy:
            warn_once(
                "model.skip_layers(start_layer=, end_layer=, skip_with=, layer_returns_tuple=)",
                "model.skip_layers(start, end, with_)",
            )
        legacy.pop("layer_returns_tuple", None)
        given = {"start": start, "end": end, "with_": with_}
        for old, new in spelled.items():
            if old in legacy:
                if given[new] is not None:
                    raise TypeError(f"skip_layers: give {new}= or 1.3's {old}=, not both")
                given[new] = legacy[old]
        if given["start"] is None or given["end"] is None:
            raise TypeError("skip_layers: missing start or end (the first and last blocks to skip)")
        original(self, given["start"], given["end"], given["with_"])

    return skip_layers


def nnterp13(cls: type[Any]) -> type[Any]:
    """Serve nnterp 1.3's names on ``cls``: add the ones it lacks, and let its constructor, ``steer`` and ``skip_layers`` take 1.3's spellings."""
    for name, value in vars(Nnterp13Names).items():
        if name.startswith("__"):
            continue
        if name in vars(cls):
            raise TypeError(f"{cls.__name__} defines {name} itself: nnterp 1.3's {name} would hide it")
        setattr(cls, name, value)
    cls.__init__ = _init(cls.__init__)
    cls.steer = _steer(cls.steer)
    cls.skip_layers = _skip_layers(cls.skip_layers)
    return cls
