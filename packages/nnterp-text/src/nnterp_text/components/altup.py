"""AltUp (Gemma 3n's block): the sandwich sublayers on one active stream, inside several residual streams per token.

The model holds ``altup_num_inputs`` streams stacked streams first,
``[num_streams, batch, seq, hidden_size]``; they are served as every
multi-stream block's are, ``Streams`` ``[batch, seq, num_streams,
hidden_size]`` (permuted on a read, permuted back on a write, so edits reach
the model). Each block is one AltUp step (``AltUpLayer``, a ``StreamLayer``
with one step instead of one per sublayer):

- predict: the streams are mixed by coefficients computed from the active
  stream (``altup_active_idx``), ``prediction[k] == sum_j
  attention_stream_mixing[j, k] * layer_input[j]`` (the mixing holds the
  identity AltUp adds back); the active prediction is ``attention_collapsed``,
  the streams collapsed by the mixing's active column
  (``attention_collapse_weights``);
- the sublayers run on the active prediction alone: LAuReL and the attention
  read its norm, the block averages them with it, ``(active + attention +
  laurel) / sqrt(2)`` (``mlp_collapsed``, what the MLP's pre-norm reads), then
  adds the MLP's post-normed output. What that adds to the active prediction
  is AltUp's ``innovation``, the sum of four terms:
  ``layer_input_rescaling`` (``(1 / sqrt(2) - 1) * attention_collapsed``),
  ``self_attn.attention_output`` and ``laurel_output`` (each post-normed
  output divided by ``sqrt(2)``) and ``mlp.mlp_output``;
- correct: the innovation is spread over every stream by
  ``innovation_spread_weights`` (the correction coefficients plus one);
- the per-layer input's term, ``per_layer_input_output``, gated on the
  corrected active stream, is added to streams ``1..num_streams-1``.

So ``layer_output[k] == innovation_spread_weights[k] * innovation + sum_j
attention_stream_mixing[j, k] * layer_input[j] + (k >= 1) *
per_layer_input_output``, the kit's ``streams_follow_from_mixing``, and
``innovation == layer_input_rescaling + attention_output + laurel_output +
mlp_output``, its ``stream_updates_add_up``. The family
(``nnterp_text.families.gemma3n_text``) keys ``AltUpLayer`` on the blocks.
"""

import math
from typing import TYPE_CHECKING, Any, ClassVar

from nnterp import EProperty, Layer, StreamLayer, unavailable
from nnterp.descriptors import gradient_through, redefine
from nnterp.layouts import Residual, StreamMixing, Streams, StreamWeights

import torch
from torch import Tensor

#: the block's calls of AltUp's two steps, as its forward's source names them
PREDICT, CORRECT = "source.self_altup_predict_0.source", "source.self_altup_correct_0.source"
#: what the block divides the active stream, the attention's and LAuReL's outputs by before adding the MLP's
AVERAGED = 1 / math.sqrt(2)

KV_STORED = (
    "its attention stores the keys and values that the last num_kv_shared_layers blocks of its layer type reuse, so "
    "those blocks find none when it is skipped"
)
KV_READ = (
    "the last num_kv_shared_layers blocks reuse the keys and values the attention of the last block of their type "
    "before them computes from its input"
)
SEVERAL_STREAMS = (
    "this block carries several residual streams (AltUp): they follow from the prediction's mixing and the "
    "innovation's spread weights (the kit's streams_follow_from_mixing), not from a sum of terms on one stream; the "
    "terms the sublayers add sum to the innovation, on the active stream (stream_updates_add_up)"
)
ONE_STEP = (
    "AltUp mixes the streams once per block, before the attention (attention_stream_mixing), and spreads what the "
    "sublayers add to the active stream once, after the MLP (innovation_spread_weights)"
)
NO_MID_STREAMS = (
    "AltUp corrects the streams once, after the MLP: between the attention and the MLP only the active stream "
    "exists, mlp_collapsed (what pre_feedforward_layernorm reads)"
)
ACTIVE_ONLY = (
    "AltUp: the MLP reads the active stream after the attention and LAuReL (mlp_collapsed), not a collapse of streams"
)
NOT_SPREAD_APART = (
    "AltUp spreads the attention's and the MLP's outputs together, in the innovation (innovation_spread_weights)"
)


def _streams_first(value: Tensor) -> Tensor:
    """``[batch, seq, num_streams, hidden]`` back to the model's ``[num_streams, batch, seq, hidden]``: a view."""
    return value.permute(2, 0, 1, 3)


def _identity(like: Tensor) -> Tensor:
    """The streams' identity mixing, in float32, on ``like``'s device."""
    return torch.eye(like.shape[-1], dtype=torch.float32, device=like.device)


def averaged(envoy: Any) -> float:
    """What the block divides a term by before adding it, as a value's scale: ``1 / sqrt(2)``."""
    return AVERAGED


class AltUpValues:
    """The values of Gemma 3n's block, declared in the order its forward serves them (as ``StreamValues`` does for
    ``StreamLayer``): the streams, AltUp's prediction, the active stream's terms, the correction, the per-layer term."""

    if TYPE_CHECKING:  # what ``AltUpLayer``, the envoy these values are mixed into, gives them
        _module: Any

        @property
        def active_stream(self) -> int: ...

    @EProperty("input", "The residual streams entering this block")
    def layer_input(self, value: Tensor) -> Streams:
        """The residual streams entering this block, ``[batch, seq, num_streams, hidden_size]``.

        The block's first argument, which the model holds streams first: served
        permuted (a view), so in-place edits and assignment reach the model;
        ``layers[i].layer_output`` is ``layers[i + 1].layer_input``. On the
        first block, stream 0 is the embeddings and the others their
        ``altup_projections``.
        """
        return value.permute(1, 2, 0, 3)

    @layer_input.transform
    def layer_input(self, view: Tensor, served: Tensor) -> Tensor:
        return _streams_first(view)

    @layer_input.postprocess
    def layer_input(self, value: Tensor) -> Tensor:
        return _streams_first(value)

    @EProperty(f"{PREDICT}.all_coefs_0.output", "How AltUp's prediction mixes the streams, the identity included")
    def attention_stream_mixing(self, value: Tensor) -> StreamMixing:
        """AltUp's prediction, ``[batch, seq, num_streams, num_streams]``: entry ``[j, k]`` is stream j's weight in stream k.

        The coefficients AltUp computes from the active stream, plus the
        identity it adds back (``predictions += hidden_states``), so that the
        streams the block carries past its sublayers are ``sum_j mixing[j, k] *
        layer_input[j]``, and ``layer_output[k] == innovation_spread_weights[k]
        * innovation + sum_j mixing[j, k] * layer_input[j] (+
        per_layer_input_output on streams 1..)``. Read where ``predict`` binds
        its coefficients; in-place edits and assignment reach the model (the
        identity is taken off again). Served in float32 whatever the model's
        dtype: in half precision one plus a coefficient rounds the coefficient
        away, and a write of what was read would not give it back.
        """
        mixing = value.float() + _identity(value)
        mixing._nnterp_mixed_from = (value, mixing.detach().clone())
        return mixing

    @attention_stream_mixing.transform
    def attention_stream_mixing(self, view: Tensor, served: Tensor) -> Tensor:
        original, unedited = getattr(view, "_nnterp_mixed_from", (None, None))
        if original is not None and torch.equal(view, unedited):
            # unedited: the model's own coefficients bit for bit, differentiated through the served mixing
            return gradient_through(original, view, 1.0)
        return (view.float() - _identity(view)).to(served.dtype)

    @attention_stream_mixing.postprocess
    def attention_stream_mixing(self, value: Tensor) -> Tensor:
        return (value.float() - _identity(value)).to(self._module.altup.prediction_coefs.weight.dtype)

    def _collapse_weights(self) -> Tensor:
        """Each stream's weight in the active prediction, what the attention reads, ``[batch, seq, num_streams]``.

        The active column of ``attention_stream_mixing``:
        ``attention_collapsed == sum_j attention_collapse_weights[..., j] * layer_input[..., j, :]``.
        Derived from the mixing, so read-only: write ``attention_stream_mixing`` instead.
        """
        return self.attention_stream_mixing[..., self.active_stream]

    attention_collapse_weights = StreamLayer.attention_collapse_weights.derived(_collapse_weights)

    @EProperty(
        "input_layernorm.input", "The active prediction: the one stream the sublayers run on", assign_in_place=True
    )
    def attention_collapsed(self, value: Tensor) -> Residual:
        """The active prediction, ``[batch, seq, hidden_size]``: the stream the attention and LAuReL read, before their norm.

        ``sum_j attention_collapse_weights[..., j] * layer_input[..., j, :]``.
        The block adds the sublayers to it and corrects against it, so an
        assignment is copied into the prediction itself and reaches all three,
        as an in-place edit does.
        """
        return value

    def _input_rescaling(self) -> Tensor:
        """What averaging the active prediction changes in it, ``[batch, seq, hidden_size]``: ``(1 / sqrt(2) - 1) *
        attention_collapsed``, a term of ``innovation``. Derived from ``attention_collapsed``: read-only."""
        return (AVERAGED - 1) * self.attention_collapsed

    layer_input_rescaling = Layer.layer_input_rescaling.derived(_input_rescaling)
    attention_norm_output = Layer.attention_norm_output.at()

    @EProperty("laurel.output", "What the LAuReL branch adds to the active stream")
    def laurel_output(self, value: Tensor) -> Residual:
        """What the LAuReL branch adds to the active stream, ``[batch, seq, hidden_size]``: its output divided by ``sqrt(2)``.

        LAuReL (``laurel``) returns the attention's normed input plus a
        low-rank, normed update of it; the block averages that with the
        attention's output and the active prediction, so it adds it divided by
        ``sqrt(2)``: a term of ``innovation``, beside ``layer_input_rescaling``,
        ``self_attn.attention_output`` and ``mlp.mlp_output``. Read where
        ``laurel`` returns; in-place edits and assignment reach the model.
        """
        return value

    laurel_output = laurel_output.scaled(averaged)

    layer_mid = unavailable(NO_MID_STREAMS)

    @EProperty(
        "pre_feedforward_layernorm.input", "The one stream the MLP reads, before its pre-norm", assign_in_place=True
    )
    def mlp_collapsed(self, value: Tensor) -> Residual:
        """The active stream between the attention and the MLP, ``[batch, seq, hidden_size]``: what the MLP's pre-norm reads.

        ``(attention_collapsed + attention + laurel) / sqrt(2)``, that is
        ``attention_collapsed + layer_input_rescaling + self_attn.attention_output
        + laurel_output``. The block holds it twice (the sum it adds the MLP's
        output to, and the norm's input), so an assignment is copied into the
        live tensor and reaches both, as an in-place edit does.
        """
        return value

    mlp_norm_output = Layer.mlp_norm_output.at("pre_feedforward_layernorm.output")
    mlp_input = Layer.mlp_input.at()

    @EProperty(f"{CORRECT}.innovation_0.output", "What the sublayers add to the active stream, which AltUp spreads")
    def innovation(self, value: Tensor) -> Residual:
        """AltUp's innovation, ``[batch, seq, hidden_size]``: what the block's sublayers add to the active prediction.

        The active stream after the MLP minus ``attention_collapsed``; the sum
        ``layer_input_rescaling + self_attn.attention_output + laurel_output +
        mlp.mlp_output``, and what the correction spreads over the streams:
        ``layer_output[k] == innovation_spread_weights[k] * innovation + sum_j
        attention_stream_mixing[j, k] * layer_input[j] (+ per_layer_input_output
        on streams 1..)``. Read where ``correct`` computes it; in-place edits
        and assignment change what is spread.
        """
        return value

    @EProperty(
        lambda block: (
            f"{CORRECT}.{'all_coefs_0' if block._module.training and block._module.config.altup_coef_clip is not None else 'all_coefs_1'}.output"
        ),
        "Each stream's share of the innovation",
    )
    def innovation_spread_weights(self, value: Tensor) -> StreamWeights:
        """Each stream's share of the innovation, ``[batch, seq, num_streams]``: AltUp's correction coefficients plus one.

        ``layer_output[k] == innovation_spread_weights[k] * innovation + (mixed
        layer_input)[k] (+ per_layer_input_output on streams 1..)``. Read where
        ``correct`` computes them (``correction_coefs(...) + 1``, clipped in
        training); a write reaches the model.
        """
        return value

    per_layer_input_output = Layer.per_layer_input_output.at("post_per_layer_input_norm.output", unavailable=None)

    @EProperty("output", "The residual streams leaving this block")
    def layer_output(self, value: Tensor) -> Streams:
        """The residual streams leaving this block, ``[batch, seq, num_streams, hidden_size]``.

        ``innovation_spread_weights[k] * innovation + sum_j
        attention_stream_mixing[j, k] * layer_input[j]``, plus
        ``per_layer_input_output`` on streams ``1..``; what the next block's
        ``layer_input`` receives. The model holds them streams first: served
        permuted (a view), so in-place edits and assignment reach the model.
        """
        return value.permute(1, 2, 0, 3)

    @layer_output.transform
    def layer_output(self, view: Tensor, served: Tensor) -> Tensor:
        return _streams_first(view)

    @layer_output.postprocess
    def layer_output(self, value: Tensor) -> Tensor:
        return _streams_first(value)


class AltUpLayer(StreamLayer, AltUpValues):
    """Gemma 3n's block: one AltUp step (predict, the sandwich sublayers and LAuReL on the active stream, correct) and a
    per-layer input added to every stream but the first."""

    #: the one step AltUp takes, each value by name, read off the values (``StreamLayer.STREAM_STEPS`` says what each
    #: key means); its output is the innovation, the sum of the sublayers' terms on the active stream
    STREAM_STEPS: ClassVar[dict[str, dict[str, Any]]] = {
        "altup": {
            "before": StreamLayer.layer_input.name,
            "mixing": StreamLayer.attention_stream_mixing.name,
            "collapse": StreamLayer.attention_collapse_weights.name,
            "collapsed": StreamLayer.attention_collapsed.name,
            "norm": "input_layernorm",
            "mid": StreamLayer.mlp_collapsed.name,
            "output": AltUpValues.innovation.name,
            "spread": AltUpValues.innovation_spread_weights.name,
            "added": StreamLayer.per_layer_input_output.name,
            "after": StreamLayer.layer_output.name,
            "terms": (
                StreamLayer.layer_input_rescaling.name,
                "self_attn.attention_output",
                AltUpValues.laurel_output.name,
                "mlp.mlp_output",
            ),
            "mid_terms": (
                StreamLayer.layer_input_rescaling.name,
                "self_attn.attention_output",
                AltUpValues.laurel_output.name,
            ),
        },
    }
    norm_readers: ClassVar[dict[str, str]] = {
        StreamLayer.attention_norm_output.name: "self_attn.input",
        StreamLayer.mlp_norm_output.name: "mlp.input",
    }
    #: the MLP's own values come just before the innovation AltUp computes from its output
    AFTER_MLP = AltUpValues.innovation.name

    layer_mid_rescaling = unavailable(SEVERAL_STREAMS)
    layer_output_rescaling = unavailable(SEVERAL_STREAMS)
    attention_spread_weights = unavailable(NOT_SPREAD_APART)
    mlp_collapse_weights = unavailable(ACTIVE_ONLY)
    mlp_stream_mixing = unavailable(ONE_STEP)
    mlp_spread_weights = unavailable(NOT_SPREAD_APART)

    @property
    def num_streams(self) -> int:
        """The residual streams this block carries per token (the config's ``altup_num_inputs``)."""
        return int(self._module.config.altup_num_inputs)

    @property
    def active_stream(self) -> int:
        """The stream the sublayers run on (the config's ``altup_active_idx``)."""
        return int(self._module.config.altup_active_idx)

    def streams_added_to(self, name: str) -> tuple[int, ...]:
        """The per-layer input's term goes to streams ``1..num_streams-1``: the block adds it to ``corrected[1:]``."""
        return tuple(range(1, self.num_streams)) if name == "per_layer_input_output" else ()

    def skip(self, hidden: Tensor) -> None:
        """Skip this block, handing ``hidden``, ``[batch, seq, num_streams, hidden_size]``, on as its streams."""
        super().skip(_streams_first(hidden))

    def stores_shared_keys(self) -> bool:
        """Whether this block's attention stores the keys and values the last ``num_kv_shared_layers`` blocks of its
        layer type reuse instead of their own."""
        return bool(getattr(self._module.self_attn, "store_full_length_kv", False))

    def skip_breaks(self) -> str | None:
        return KV_STORED if self.stores_shared_keys() else None

    def read_beside_the_stream(self) -> str | None:
        return KV_READ if self.stores_shared_keys() else None


# AltUp's values on the block itself, over StreamLayer's: a read finds them first; their place in the block's order
# stays the one AltUpValues gave them, and their layouts are inherited from the values they redefine
redefine(AltUpLayer, **{name: value for name, value in vars(AltUpValues).items() if isinstance(value, EProperty)})
