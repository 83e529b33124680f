"""OLMo-2: norms only on the sublayers' outputs (``post_attention_layernorm``, ``post_feedforward_layernorm``), none before.

The attention and the MLP read the stream itself, so the pre-norm outputs are
unavailable and the contributions are the post norms' outputs.
"""

from nnterp import PostNormAttention, PostNormLayer, PostNormMlp
from nnterp.families import default

RENAME = default.RENAME
ENVOYS = {"layers.*": PostNormLayer, "layers.*.self_attn": PostNormAttention, "layers.*.mlp": PostNormMlp}
