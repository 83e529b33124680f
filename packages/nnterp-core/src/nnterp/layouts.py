"""The shapes of standard values: axis names, jaxtyping aliases, and axis sizes.

An axis that is a fact about the model is named as the size that holds it
(``HIDDEN`` is ``"hidden_size"``, ``HEADS`` is ``"num_heads"``), so
``axis_size(envoy, HEADS)`` finds the number on the envoy that declares it.
Axes that depend on the input (``batch``, ``seq``, ``query``, ``key``) have no
size to look up.
"""

from __future__ import annotations

from typing import Any

from jaxtyping import Float, Int
from torch import Tensor

BATCH = "batch"
SEQ = "seq"
QUERY = "query"
KEY = "key"
HIDDEN = "hidden_size"
HEADS = "num_heads"
KV_HEADS = "num_kv_heads"
HEAD_DIM = "head_dim"
QK_HEAD_DIM = "qk_head_dim"
INTERMEDIATE = "intermediate_size"
VOCAB = "vocab_size"
EXPERTS = "num_experts"
TOP_K = "top_k"
#: the tokens of one request as an engine holds them, flat: vLLM packs every request of a step into one axis
TOKENS = "tokens"
#: the residual streams a multi-stream block carries per token (hyper-connections' ``hc_mult``)
STREAMS = "num_streams"

#: the residual stream and the contributions added to it
Residual = Float[Tensor, f"{BATCH} {SEQ} {HIDDEN}"]
#: scores and probabilities, one row per query position
Pattern = Float[Tensor, f"{BATCH} {HEADS} {QUERY} {KEY}"]
Queries = Float[Tensor, f"{BATCH} {HEADS} {SEQ} {QK_HEAD_DIM}"]
#: before repeat_kv: num_kv_heads wide under grouped-query attention
Keys = Float[Tensor, f"{BATCH} {KV_HEADS} {SEQ} {QK_HEAD_DIM}"]
Values = Float[Tensor, f"{BATCH} {KV_HEADS} {SEQ} {HEAD_DIM}"]
#: sequence before heads, as the shared attention interface returns them
HeadOutputs = Float[Tensor, f"{BATCH} {SEQ} {HEADS} {HEAD_DIM}"]
Neurons = Float[Tensor, f"{BATCH} {SEQ} {INTERMEDIATE}"]
Logits = Float[Tensor, f"{BATCH} {SEQ} {VOCAB}"]
#: a router's logits, one per routed expert
RouterLogits = Float[Tensor, f"{BATCH} {SEQ} {EXPERTS}"]
#: one per routing slot: the weight a slot's expert output is multiplied by, and which expert it is
ExpertWeights = Float[Tensor, f"{BATCH} {SEQ} {TOP_K}"]
ExpertIndices = Int[Tensor, f"{BATCH} {SEQ} {TOP_K}"]
#: each slot's weighted expert output, before the slots are summed
ExpertOutputs = Float[Tensor, f"{BATCH} {SEQ} {TOP_K} {HIDDEN}"]
#: a multi-stream block's residual: several streams per token (hyper-connections)
Streams = Float[Tensor, f"{BATCH} {SEQ} {STREAMS} {HIDDEN}"]
#: stream-to-stream mixing per token: entry ``[j, k]`` is input stream j's weight in output stream k
StreamMixing = Float[Tensor, f"{BATCH} {SEQ} {STREAMS} {STREAMS}"]
#: one weight per stream per token: how a sublayer's input collapses the streams, or its output spreads over them
StreamWeights = Float[Tensor, f"{BATCH} {SEQ} {STREAMS}"]

#: the residual stream as an engine holds it, flat over one request's tokens (vLLM), and what is added to it
FlatResidual = Float[Tensor, f"{TOKENS} {HIDDEN}"]
#: an engine's MLP neurons, flat over one request's tokens
FlatNeurons = Float[Tensor, f"{TOKENS} {INTERMEDIATE}"]
#: an engine's router logits, flat over one request's tokens
FlatRouterLogits = Float[Tensor, f"{TOKENS} {EXPERTS}"]

#: alias name by layout, for the repr line of a value
NAMES: dict[int, str] = {}


def declare(namespace: dict[str, Any]) -> None:
    """Name the layouts a module declares (its capitalized jaxtyping aliases), so values print ``State``, not jaxtyping's spelling.

    A package with layouts of its own calls ``declare(globals())`` at the end of its layouts module.
    """
    NAMES.update(
        {
            id(layout): name
            for name, layout in namespace.items()
            if name[:1].isupper() and hasattr(layout, "dims") and not isinstance(layout, str)
        }
    )


declare(dict(globals()))


def layout_name(layout: Any) -> str:
    """The alias a layout was declared as (``Residual``), else jaxtyping's own spelling."""
    return NAMES.get(id(layout), getattr(layout, "__name__", repr(layout)))


def dims(layout: Any) -> tuple[str, ...]:
    """The axis names of a jaxtyping layout: ``("batch", "seq", "hidden_size")``."""
    return tuple(getattr(dim, "name", str(dim)) for dim in layout.dims)


#: the axes whose size is the input's, by the axis of the token ids ``[batch, seq]`` that gives it (a call without a cache)
INPUT_AXES = {BATCH: 0, SEQ: 1, QUERY: 1, KEY: 1}


def expected_shape(envoy: Any, layout: Any, tokens: tuple[int, int] | None) -> tuple[int | None, ...]:
    """The shape a value of ``layout`` has on ``envoy``: model axes by ``axis_size``, input axes off ``tokens``.

    ``tokens`` is the ``(batch, seq)`` of the token ids of a call without a
    cache, which is what the text blocks' input axes are; None leaves them
    unknown. An axis no envoy declares is unknown too (None).
    """
    shape: list[int | None] = []
    for axis in dims(layout):
        if axis in INPUT_AXES:
            shape.append(None if tokens is None else tokens[INPUT_AXES[axis]])
            continue
        try:
            shape.append(axis_size(envoy, axis))
        except ValueError:
            shape.append(None)
    return tuple(shape)


def axis_size(envoy: Any, axis: str) -> int:
    """The size of ``axis`` on the values ``envoy`` serves.

    The attribute named ``axis`` on ``envoy`` when its class declares it, else on
    the first envoy above it that does, up to the model's root. Only an envoy's
    class counts, never an attribute of the wrapped module, which can share a
    name and hold another number::

        axis_size(model.layers[3], HIDDEN)            # model.hidden_size
        axis_size(model.layers[3].self_attn, HEADS)   # this block's heads

    Raises ``ValueError`` when no envoy from ``envoy`` up declares ``axis``.
    """
    node = envoy
    while node is not None:
        if any(axis in vars(cls) for cls in type(node).__mro__):
            return getattr(node, axis)
        node = node.parent
    raise ValueError(
        f"no envoy from {getattr(envoy, 'path', envoy)!r} up to the root declares the size "
        f"{axis!r}; it depends on the input, or the family names it differently"
    )
