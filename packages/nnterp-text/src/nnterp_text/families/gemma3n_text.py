"""Gemma-3n (text): Gemma-2's sandwich sublayers inside AltUp, whose state is several streams, not one.

The block receives and returns ``altup_num_inputs`` streams stacked,
``[altup_num_inputs, batch, seq, hidden_size]``: it predicts them, runs the
sublayers on the active one, then corrects them all from the result and adds a
per-layer-input term to all but the active one. So there is no one stream for
``layer_input`` or ``layer_output``. On the active stream, the attention's
output is averaged with the LAuReL branch, ``layer_mid = (active + attention +
laurel) / sqrt(2)``, so no attention contribution sums to it either; the MLP's
post-normed output is what is added to ``layer_mid``, and is served.
"""

from nnterp import PostNormAttention, SandwichLayer, TinyConfig, unavailable

from . import gemma2

ALTUP = (
    "AltUp: the block {verb} altup_num_inputs streams stacked, [altup_num_inputs, batch, seq, hidden_size], "
    "not one residual stream; the block's own {where} holds them"
)
LAUREL = (
    "AltUp with LAuReL: the attention's output is added to the active prediction and averaged with the "
    "LAuReL branch, layer_mid = (active + attention + laurel) / sqrt(2), so no tensor is what the attention "
    "adds; its own post-normed output is post_attention_layernorm.output"
)


class AltUpLayer(SandwichLayer):
    """The sandwich block inside AltUp: the streams between and around the sublayers are the active stream's."""

    layer_input = unavailable(ALTUP.format(verb="receives", where="input"))
    layer_output = unavailable(ALTUP.format(verb="returns", where="output"))


class LaurelAttention(PostNormAttention):
    attention_output = unavailable(LAUREL)


FAMILY = gemma2.FAMILY.replace(
    name="gemma3n_text",
    model_types=("gemma3n_text",),
    envoys={**gemma2.FAMILY.envoys, "layers.*": AltUpLayer, "layers.*.self_attn": LaurelAttention},
    tiny={"gemma3n_text": TinyConfig("gemma3n_text", {"num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2, "num_kv_shared_layers": 2, "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 320, "laurel_rank": 8, "sliding_window": 4, "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0], "intermediate_size": 128})},
    skips={
        "gemma3n_text": {
            "contribution": "AltUp",
            "contribution_at_every_step": "AltUp",
            "gradients_follow_the_stream": "AltUp",
            "gradient_flows_back_through_each_block": "AltUp",
            "logits_from_last_layer": "AltUp",
            "mid_stream": "AltUp",
            "padded_rows_match_alone": "AltUp",
            "skip_hands_on_hidden": "AltUp",
            "stream_continuity": "AltUp",
        },
    },
)
