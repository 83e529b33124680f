"""Gemma-4 (text): Gemma-2's sandwich block and softcapped logits, with two steps after the MLP that no contribution covers.

After adding the MLP's post-normed output the block adds a per-layer-input
term (``hidden_size_per_layer_input > 0``) and then multiplies the whole stream
in place by ``layer_scalar``, a per-layer buffer the checkpoint sets (one in
a fresh model, not one in general): ``layer_output = layer_scalar *
(layer_mid + mlp + per_layer)``. What the MLP changes in the stream therefore
includes ``(layer_scalar - 1) * layer_mid``, which no tensor holds, so
``mlp_output`` is unavailable; the attention's contribution and the mid stream
are exact. Head widths differ by layer type (``head_dim`` on sliding layers,
``global_head_dim`` on full ones), and each block's sizes are read off its module.
"""

from nnterp import PostNormMlp, unavailable
from nnterp_text.families.gemma2 import ENVOYS as GEMMA2
from nnterp_text.families.gemma2 import RENAME, project_on_vocab  # noqa: F401 - the family's logits

SCALED_STREAM = (
    "the block multiplies the whole stream by layer_scalar (a per-layer buffer from the checkpoint) after "
    "adding the MLP's output and the per-layer-input term: layer_output = layer_scalar * (layer_mid + mlp + "
    "per_layer), so what the MLP changes in the stream includes (layer_scalar - 1) * layer_mid, which no "
    "tensor holds; the MLP's own contribution before those steps is post_feedforward_layernorm.output"
)


class ScaledStreamMlp(PostNormMlp):
    mlp_output = unavailable(SCALED_STREAM)


ENVOYS = {**GEMMA2, "layers.*.mlp": ScaledStreamMlp}
