"""What nnterp's own code reads off a model with the standard names, typed.

nnsight's envoys answer any attribute (``Envoy.__getattr__`` is typed ``Any``), so a
parameter annotated with the concrete class lets a misspelt ``model.num_layer`` through
the type checker. ``StandardModel`` names what the toolkit, the proof at load and the
kit read: annotate ``model: StandardModel`` and mypy holds each read to this list.
``StandardizedTransformer`` satisfies it structurally (nothing subclasses it). The checker
cannot hold the class to it (an envoy's ``__getattr__`` answers every name), so a test holds
a loaded model's attributes to ``members``; ``VisionModel`` adds what a vision family's
envoys put on the same class.

A block (``model.layers[i]``) and the modules under it stay ``Any``: their values are
the components' descriptors, which differ per family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .family import Family


class StandardModel(Protocol):
    """A model with the standard names: the root values, the sizes, ``family``, and nnsight's tracing calls."""

    family: Family
    tokenizer: Any
    config: Any
    embed_tokens: Any  # the root modules' envoys
    norm: Any
    lm_head: Any
    output: Any  # the root module's output and inputs, in a trace (nnsight's)
    inputs: Any
    _module: Any  # the wrapped ``nn.Module`` (nnsight's)

    @property
    def layers(self) -> Sequence[Any]:
        """The decoder blocks, each a component envoy (``Layer`` and its siblings)."""

    @property
    def num_layers(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def text_config(self) -> Any: ...
    @property
    def device(self) -> Any: ...
    @property
    def dtype(self) -> Any: ...
    @property
    def logits(self) -> Any:
        """``[batch, seq, vocab_size]`` (``[tokens, vocab_size]`` on vLLM) in a trace: nnsight's proxy, read and written."""

    def trace(self, *inputs: Any, **kwargs: Any) -> Any: ...
    def generate(self, *inputs: Any, **kwargs: Any) -> Any: ...
    def project_on_vocab(self, hidden: Any) -> Any:
        """``[..., hidden_size] -> [..., vocab_size]``: a tensor outside a trace, nnsight's value inside one."""

    def support(self, layer: int | None = None) -> dict[str, Any]: ...
    def dispatch(self) -> None: ...
    def modules(self, *args: Any, **kwargs: Any) -> Any: ...
    def _batch_size(self, *inputs: Any, **kwargs: Any) -> int: ...  # nnsight's batching, which the hooks path drives
    def _batch(self, invokes: list, fn: Any) -> tuple: ...


class VisionModel(StandardModel, Protocol):
    """A vision-language model: ``vision`` (the tower, its blocks under ``vision.layers``) and ``projector``."""

    vision: Any
    projector: Any
    processor: Any


def members(protocol: type) -> list[str]:
    """The names a protocol declares (its annotations, properties and methods, its bases' included)."""
    names: dict[str, None] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (Protocol, object) or not getattr(klass, "_is_protocol", False):
            continue
        names.update(dict.fromkeys(getattr(klass, "__annotations__", {})))
        names.update(
            dict.fromkeys(name for name in vars(klass) if not name.startswith("__") and name != "_is_protocol")
        )
    return [name for name in names if not name.startswith("_abc")]
