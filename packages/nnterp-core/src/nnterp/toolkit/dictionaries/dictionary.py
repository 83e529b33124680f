"""The dictionary itself: a sparse autoencoder or transcoder as tensors, its maths, and where it sits on a model.

Its fields follow SAELens's conventions; the file formats are read and written by
``nnterp.toolkit.dictionary_formats``, behind ``Dictionary.from_*`` and ``save``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor

from ...protocols import StandardModel
from ..cache import expand_names
from .sites import check_site, standard_site

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
        expected = {
            "W_dec": (self.W_dec, (d_sae, d_out)),
            "b_enc": (self.b_enc, (d_sae,)),
            "b_dec": (self.b_dec, (d_out,)),
        }
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
            raise ValueError(
                f"normalize_activations {self.normalize_activations!r} is not one of {', '.join(NORMALIZATIONS)}"
            )
        if self.writes is None:
            if d_out != d_in:
                raise ValueError(
                    f"an SAE decodes into the value it reads, so d_out ({d_out}) must equal d_in ({d_in}); give writes= for a transcoder"
                )
            if self.W_skip is not None:
                raise ValueError("W_skip is a transcoder's skip connection: give writes= too")
        elif self.apply_b_dec_to_input:
            raise ValueError(
                "apply_b_dec_to_input subtracts the output bias from the input: a transcoder cannot (b_dec is its output's)"
            )
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
            return (
                None
                if tensor is None
                else tensor.to(device=device, dtype=dtype if tensor.is_floating_point() else None)
            )

        # W_enc, W_dec, b_enc and b_dec are never None, so each stays a tensor
        moved: dict[str, Any] = {
            name: move(getattr(self, name)) for name in ("W_enc", "W_dec", "b_enc", "b_dec", "threshold", "W_skip")
        }
        return replace(self, **moved)

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
            # __post_init__ refuses a jumprelu dictionary without a threshold
            return pre.relu() * (pre > cast(Tensor, self.threshold))
        if self.rescale_acts_by_decoder_norm:
            pre = pre * self.W_dec.norm(dim=-1)
        values, indices = pre.topk(cast(int, self.k), dim=-1)  # __post_init__ refuses a topk dictionary without k
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
        return cls(
            W_enc.detach(), W_dec.detach(), b_enc.detach(), b_dec.detach(), reads=reads, writes=writes, **options
        )

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
        from ..dictionary_formats import load_saelens

        return load_saelens(path, reads=reads, writes=writes, norm_scaling_factor=norm_scaling_factor, device=device)

    @classmethod
    def from_gemma_scope(
        cls,
        path: str | Path,
        *,
        reads: str,
        writes: str | None = None,
        model: StandardModel | None = None,
        device: str | torch.device = "cpu",
    ) -> Dictionary:
        """Load a Gemma Scope ``params.npz`` (a JumpReLU SAE, or transcoder with ``writes``) at ``reads``: ``dictionary_formats.load_gemma_scope``."""
        from ..dictionary_formats import load_gemma_scope

        return load_gemma_scope(path, reads=reads, writes=writes, model=model, device=device)

    @classmethod
    def from_sparsify(
        cls,
        path: str | Path,
        model: StandardModel | None = None,
        *,
        hookpoint: str | None = None,
        reads: str | None = None,
        writes: str | None = None,
        device: str | torch.device = "cpu",
    ) -> Dictionary:
        """Load an EleutherAI sparsify hookpoint folder (a TopK SAE or transcoder), sited on ``model``: ``dictionary_formats.load_sparsify``."""
        from ..dictionary_formats import load_sparsify

        return load_sparsify(path, model, hookpoint=hookpoint, reads=reads, writes=writes, device=device)

    def save(self, path: str | Path) -> Path:
        """Write this dictionary as a SAELens 6 folder (``cfg.json``, ``sae_weights.safetensors``); the folder's path.

        ``hook_name`` (and ``hook_name_out``) are ``reads`` (and ``writes``) as
        given; ``from_saelens`` loads the folder back equal.
        """
        from ..dictionary_formats import save_saelens

        return save_saelens(self, path)

    # -- on a model ----------------------------------------------------------------

    def sites(self, model: StandardModel, *, function: str = "Dictionary.sites") -> tuple[str, str]:
        """The standard names this dictionary reads and writes on ``model``, checked before anything runs.

        TransformerLens names resolve through ``nnterp.toolkit.names``. Raises
        ``KeyError`` for a name that is no value of the model (a block past the
        model's, naming how many it has), ``Unavailable`` for one this
        checkpoint lacks, ``InvalidArgument`` (of ``function``'s ``dictionary``)
        where a value's width is not ``d_in`` (``d_out``) or it has no
        ``[batch, seq, width]`` layout, and ``ValueError`` where a transcoder
        writes before it reads.
        """
        reads = standard_site(model, self.reads)
        writes = reads if self.writes is None else standard_site(model, self.writes)
        check_site(model, self, reads, "d_in", "reads", function)
        if writes != reads:
            check_site(model, self, writes, "d_out", "writes", function)
            if expand_names(model, [reads, writes])[0] != reads:
                raise ValueError(
                    f"this transcoder writes {writes}, which the forward computes before {reads}, the value it reads"
                )
        return reads, writes


def _shape(tensor: Tensor) -> list[int]:
    return list(tensor.shape)
