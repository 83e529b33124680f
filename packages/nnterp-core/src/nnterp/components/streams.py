"""A block that carries several residual streams per token (hyper-connections): the streams, how each sublayer reads them, and how it writes back.

DeepSeek-V4's manifold-constrained hyper-connections (mHC) and HY-V4's keep
``num_streams`` residual streams per token, ``[batch, seq, num_streams,
hidden_size]``. Around each sublayer a hyper-connection module computes, from
the streams themselves, three sets of weights:

- the collapse weights (``pre``), ``[batch, seq, num_streams]``: the sublayer
  reads one stream, ``sum_j collapse[j] * streams[j]``;
- the spread weights (``post``), ``[batch, seq, num_streams]``: the sublayer's
  output is added to stream ``k`` times ``spread[k]``;
- the stream mixing (``comb``), ``[batch, seq, num_streams, num_streams]``:
  the residual streams carried past the sublayer are mixed, stream ``k``
  receiving ``sum_j mixing[j, k] * streams[j]`` (HY-V4 carries them unmixed,
  the identity).

So ``streams_after[k] = spread[k] * output + sum_j mixing[j, k] * streams_before[j]``
around the attention (``layer_input`` to ``layer_mid``) and again around the MLP
(``layer_mid`` to ``layer_output``), which is the identity the kit's
``streams_follow_from_mixing`` holds.
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor

from ..descriptors import EProperty, unavailable
from ..layouts import Residual, StreamMixing, Streams, StreamWeights
from .layer import Layer
from .standard import VALUE_NAMES

#: why a multi-stream block has no single-stream terms (a rescaling, a per-layer input) and no sum of them
SEVERAL_STREAMS = (
    "this block carries several residual streams: they follow from the hyper-connections' mixing and spread weights "
    "(the kit's streams_follow_from_mixing), not from a sum of terms on one stream"
)

#: the hyper-connection around the attention and the one around the MLP, as the block names them
ATTENTION_HC, MLP_HC = "attn_hc", "ffn_hc"

#: the binding of the collapse weights inside a hyper-connection's forward: ``pre = sigmoid(...) + eps``, which the
#: forward consumes itself (it returns the collapsed stream, not ``pre``)
COLLAPSE = "source.pre_0.output"


class StreamValues:
    """The values of a block carrying several residual streams, declared in the order its forward serves them.

    A plain mixin, so that ``StreamLayer``'s values come in forward order
    (``declared_values`` keeps the place a value was first declared, and this
    class comes before ``Layer`` in that walk): ``layer_input``, the
    attention's hyper-connection, ``attention_norm_output``, ``layer_mid``,
    the MLP's, ``mlp_norm_output``, ``mlp_input``, ``layer_output``.
    """

    @EProperty("input", "The residual streams entering this block")
    def layer_input(self, value: Tensor) -> Streams:
        """The residual streams entering this block, ``[batch, seq, num_streams, hidden_size]``.

        The block's first argument; ``layers[i].layer_output`` is
        ``layers[i + 1].layer_input``. Assignment and in-place edits reach the model.
        """
        return value

    @EProperty(f"{ATTENTION_HC}.{COLLAPSE}", "The weights collapsing the streams into the attention's input")
    def attention_collapse_weights(self, value: Tensor) -> StreamWeights:
        """Each stream's weight in what the attention reads, ``[batch, seq, num_streams]``.

        ``attention_collapsed == sum_j attention_collapse_weights[..., j] * layer_input[..., j, :]``.
        Read where ``attn_hc`` computes it (``pre``); a write changes the attention's input.
        """
        return value

    @EProperty(f"{ATTENTION_HC}.output", "How the streams are mixed past the attention", select=1)
    def attention_stream_mixing(self, value: Tensor) -> StreamMixing:
        """The stream-to-stream mixing past the attention, ``[batch, seq, num_streams, num_streams]``.

        Entry ``[j, k]`` is stream j's weight in stream k of ``layer_mid``:
        ``layer_mid[k] == attention_spread_weights[k] * attention_output + sum_j mixing[j, k] * layer_input[j]``.
        Read where ``attn_hc`` returns it (``comb``); a write reaches the model.
        """
        return value

    @EProperty(f"{ATTENTION_HC}.output", "The weights spreading the attention's output over the streams", select=0)
    def attention_spread_weights(self, value: Tensor) -> StreamWeights:
        """Each stream's share of the attention's output, ``[batch, seq, num_streams]``.

        ``layer_mid[k] == attention_spread_weights[k] * attention_output + (mixed layer_input)[k]``.
        Read where ``attn_hc`` returns it (``post``); a write reaches the model.
        """
        return value

    @EProperty(f"{ATTENTION_HC}.output", "The one stream the attention reads, before its pre-norm", select=2)
    def attention_collapsed(self, value: Tensor) -> Residual:
        """The single stream the attention reads, ``[batch, seq, hidden_size]``: the streams collapsed, before the pre-norm.

        ``sum_j attention_collapse_weights[..., j] * layer_input[..., j, :]``;
        ``input_layernorm`` normalizes it into ``attention_norm_output``.
        Read where ``attn_hc`` returns it; a write reaches the attention.
        """
        return value

    attention_norm_output = Layer.attention_norm_output.at()

    @EProperty(f"{MLP_HC}.input", "The residual streams between the attention and the MLP", assign_in_place=True)
    def layer_mid(self, value: Tensor) -> Streams:
        """The residual streams between the two sublayers, ``[batch, seq, num_streams, hidden_size]``.

        The attention's output spread over the streams plus the streams mixed
        (``attention_stream_mixing``); read where ``ffn_hc`` is called with them.
        The block holds them twice (the MLP's hyper-connection's input and the
        residual mixed past the MLP), so an assignment is copied into the live
        tensor and reaches both, as an in-place edit does.
        """
        return value

    @EProperty(f"{MLP_HC}.{COLLAPSE}", "The weights collapsing the streams into the MLP's input")
    def mlp_collapse_weights(self, value: Tensor) -> StreamWeights:
        """Each stream's weight in what the MLP reads, ``[batch, seq, num_streams]``.

        ``mlp_collapsed == sum_j mlp_collapse_weights[..., j] * layer_mid[..., j, :]``.
        Read where ``ffn_hc`` computes it (``pre``); a write changes the MLP's input.
        """
        return value

    @EProperty(f"{MLP_HC}.output", "How the streams are mixed past the MLP", select=1)
    def mlp_stream_mixing(self, value: Tensor) -> StreamMixing:
        """The stream-to-stream mixing past the MLP, ``[batch, seq, num_streams, num_streams]``.

        ``layer_output[k] == mlp_spread_weights[k] * mlp_output + sum_j mlp_stream_mixing[j, k] * layer_mid[j]``.
        Read where ``ffn_hc`` returns it (``comb``); a write reaches the model.
        """
        return value

    @EProperty(f"{MLP_HC}.output", "The weights spreading the MLP's output over the streams", select=0)
    def mlp_spread_weights(self, value: Tensor) -> StreamWeights:
        """Each stream's share of the MLP's output, ``[batch, seq, num_streams]``.

        ``layer_output[k] == mlp_spread_weights[k] * mlp_output + (mixed layer_mid)[k]``.
        Read where ``ffn_hc`` returns it (``post``); a write reaches the model.
        """
        return value

    @EProperty(f"{MLP_HC}.output", "The one stream the MLP reads, before its pre-norm", select=2)
    def mlp_collapsed(self, value: Tensor) -> Residual:
        """The single stream the MLP reads, ``[batch, seq, hidden_size]``: the mid streams collapsed, before the pre-norm.

        ``sum_j mlp_collapse_weights[..., j] * layer_mid[..., j, :]``;
        ``post_attention_layernorm`` normalizes it into ``mlp_norm_output``.
        Read where ``ffn_hc`` returns it; a write reaches the MLP.
        """
        return value

    mlp_norm_output = Layer.mlp_norm_output.at()
    mlp_input = Layer.mlp_input.at()

    @EProperty("output", "The residual streams leaving this block", select=0)
    def layer_output(self, value: Tensor) -> Streams:
        """The residual streams leaving this block, ``[batch, seq, num_streams, hidden_size]``.

        ``mlp_spread_weights[k] * mlp_output + sum_j mlp_stream_mixing[j, k] * layer_mid[j]``;
        what the next block's ``layer_input`` receives, and (after the last
        block) what the model's ``hc_head`` collapses for the final norm.
        Assignment and in-place edits reach the model.
        """
        return value


class StreamLayer(Layer, StreamValues):
    """A decoder block carrying several residual streams per token (hyper-connections): ``Streams`` at its boundaries.

    ``layer_input``, ``layer_mid`` and ``layer_output`` are ``[batch, seq,
    num_streams, hidden_size]``. Each sublayer reads one stream, its
    ``*_collapsed`` value (the streams weighed by its ``*_collapse_weights``),
    through its pre-norm; its output (``self_attn.attention_output``,
    ``mlp.mlp_output``, ``[batch, seq, hidden_size]``) is spread over the
    streams by its ``*_spread_weights`` and added to the streams carried past
    it, mixed by its ``*_stream_mixing``. The weights are read where the
    hyper-connection module computes them (``attn_hc`` around the attention,
    ``ffn_hc`` around the MLP), so writing one changes what the model computes.

    A family whose hyper-connection returns its values in another order
    moves them with ``.at(select=...)``; one that carries the streams unmixed
    sets ``UNMIXED`` to say so, and its ``*_stream_mixing`` is unavailable with
    that reason (the identity is the mixing there).
    """

    #: the first block value the forward serves after the MLP (``Layer.AFTER_MLP``): ``layer_output``, since the block's
    #: values in forward order are ``StreamValues``'
    AFTER_MLP: ClassVar[str] = StreamValues.layer_output.name

    #: why the streams carried past a sublayer are not mixed (the mixing is the identity), or None (here) where they
    #: are; a family whose hyper-connections carry them unmixed sets it (HY-V4)
    UNMIXED: ClassVar[str | None] = None

    #: the block's steps in stream terms, each the value names (listed in the forward's order) of ``after[k] ==
    #: spread[k] * output + sum_j mixing[j, k] * before[j]`` (the kit's ``streams_follow_from_mixing``) and of
    #: ``collapsed == sum_j collapse[j] * before[j]``, ``norm`` the module called with ``collapsed`` and ``output`` the
    #: sublayer's contribution as a path. A step may add a term besides (``added``: a ``Residual`` value) to the streams
    #: ``streams_added_to`` names, and may say its output is a sum of named terms (``terms``, read on the stream it
    #: runs on) with, where it has one, the stream between them (``mid``, the first ``mid_terms``' sum added to
    #: ``collapsed``). Here a hyper-connection block's, one step per sublayer; AltUp (Gemma 3n) sets one per block
    STREAM_STEPS: ClassVar[dict[str, dict[str, Any]]] = {
        "self_attn": {
            "before": StreamValues.layer_input.name,
            "collapse": StreamValues.attention_collapse_weights.name,
            "mixing": StreamValues.attention_stream_mixing.name,
            "spread": StreamValues.attention_spread_weights.name,
            "collapsed": StreamValues.attention_collapsed.name,
            "norm": "input_layernorm",
            "output": "self_attn.attention_output",
            "after": StreamValues.layer_mid.name,
        },
        "mlp": {
            "before": StreamValues.layer_mid.name,
            "collapse": StreamValues.mlp_collapse_weights.name,
            "mixing": StreamValues.mlp_stream_mixing.name,
            "spread": StreamValues.mlp_spread_weights.name,
            "collapsed": StreamValues.mlp_collapsed.name,
            "norm": "post_attention_layernorm",
            "output": "mlp.mlp_output",
            "after": StreamValues.layer_output.name,
        },
    }

    def streams_added_to(self, name: str) -> tuple[int, ...]:
        """The streams a step's ``added`` term ``name`` is added to, after the spread and the mixing: none here."""
        return ()

    @property
    def num_streams(self) -> int:
        """The residual streams this block carries per token (the config's ``hc_mult``)."""
        return int(getattr(self._module, ATTENTION_HC).hc_mult)

    layer_input_rescaling = unavailable(SEVERAL_STREAMS)
    layer_mid_rescaling = unavailable(SEVERAL_STREAMS)
    per_layer_input_output = unavailable(SEVERAL_STREAMS)
    layer_output_rescaling = unavailable(SEVERAL_STREAMS)

    def contributions(self) -> tuple[str, ...]:
        """None that add to one stream: each sublayer's output is spread over the streams and the streams are mixed, so
        ``layer_input`` plus the outputs is not ``layer_output``. The identity the values are defined by here is the
        kit's ``streams_follow_from_mixing`` (see the module's docstring)."""
        return ()


# the stream values on the component itself, over Layer's (layer_input, layer_mid, layer_output...): a read finds them
# first, and an error on another component names StreamLayer as their owner; their place in the block's order stays
# the one StreamValues gave them
for _name, _value in list(vars(StreamValues).items()):
    if isinstance(_value, EProperty):
        setattr(StreamLayer, _name, _value)
        VALUE_NAMES.add(_name)
del _name, _value
