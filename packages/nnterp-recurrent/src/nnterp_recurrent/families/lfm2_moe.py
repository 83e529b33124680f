"""LFM2-MoE: LFM2's blocks, the first ``num_dense_layers`` with its dense MLP, the rest with a sigmoid mixture.

The router (``feed_forward.gate``, ``mlp.router``) scores with a sigmoid and
chooses by the scores plus the block's ``expert_bias`` (a buffer of the
mixture, handed to the router), weighs by the unbiased scores, renormalizes
(``norm_topk_prob``) and scales (``routed_scaling_factor``); the experts are
fused, with no shared expert.
"""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import SigmoidMoe
from nnterp.tiny import TinyConfig

from torch import Tensor
from transformers.models.lfm2_moe.modeling_lfm2_moe import Lfm2MoeShortConv

from . import lfm2


class Lfm2Moe(SigmoidMoe):
    """LFM2-MoE's feed-forward: LFM2's SwiGLU on dense blocks, a sigmoid mixture whose selection bias the block holds."""

    mlp_activation = SigmoidMoe.mlp_activation.at("source.F_silu_0.output")

    def selection_bias(self) -> Tensor | None:
        """``expert_bias``, ``[num_experts]``: added to the scores to choose the experts, not to weigh them."""
        return self._module.expert_bias if getattr(self._module, "use_expert_bias", False) else None


FAMILY = lfm2.FAMILY.replace(
    name="lfm2_moe",
    model_types=("lfm2_moe",),
    modeling=("transformers.models.lfm2_moe.modeling_lfm2_moe",),
    rename={**lfm2.RENAME, Lfm2MoeShortConv: "linear_attn", "feed_forward.gate": "feed_forward.router"},
    envoys={**lfm2.FAMILY.envoys, "layers.*.mlp": Lfm2Moe},
    # a dense block, then two mixtures: a conv block and an attention block
    tiny={"lfm2_moe": TinyConfig("lfm2_moe", {**lfm2.TINY, "num_dense_layers": 1})},
    skips={"lfm2_moe": lfm2.SKIPS},
)
