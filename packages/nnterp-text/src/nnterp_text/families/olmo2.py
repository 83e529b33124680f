"""OLMo-2: norms only on the sublayers' outputs (``post_attention_layernorm``, ``post_feedforward_layernorm``), none before.

The attention and the MLP read the stream itself, so the pre-norm outputs are
unavailable and the contributions are the post norms' outputs.
"""

from nnterp import PostNormAttention, PostNormLayer, PostNormMlp, TinyConfig
from nnterp.families import default

FAMILY = default.FAMILY.replace(
    name="olmo2",
    model_types=("olmo2", "olmo3", "exaone4"),
    envoys={"layers.*": PostNormLayer, "layers.*.self_attn": PostNormAttention, "layers.*.mlp": PostNormMlp},
    tiny={model_type: TinyConfig(model_type) for model_type in ("olmo2", "olmo3", "exaone4")},
    # the norms follow the sublayers: nothing is called with a norm's output
    skips={
        model_type: {"norm_outputs_feed_the_sublayers": "a post-norm block"}
        for model_type in ("olmo2", "olmo3", "exaone4")
    },
)
