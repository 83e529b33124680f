"""PhiMoE: the default block, its mixture routed by ``router``'s sparsemixer: top-1, then top-1 of the rest, each masked-softmaxed.

The router is itself the logits' Linear (``super().forward`` in its forward)
and hands them to transformers' ``sparsemixer``: the best expert, weighed by
the softmax over the experts within ``router_jitter_noise`` of it, then the
best of the rest, weighed likewise. ``route`` calls that same function as in
eval.
"""

from nnterp import Moe, TinyConfig
from nnterp.families import default

from torch import Tensor


class SparseMixerMoe(Moe):
    LOGITS = "router.source.forward_0"

    def route(self, router_logits: Tensor) -> tuple[Tensor, Tensor]:
        from transformers.models.phimoe.modeling_phimoe import sparsemixer

        router = self.router._module
        flat = router_logits.reshape(-1, router_logits.shape[-1])
        weights, indices = sparsemixer(flat, jitter_eps=router.router_jitter_noise, training=False, top_k=self.top_k)
        return weights.reshape(*router_logits.shape[:-1], -1), indices.reshape(*router_logits.shape[:-1], -1)


FAMILY = default.FAMILY.replace(
    name="phimoe",
    model_types=("phimoe",),
    envoys={**default.FAMILY.envoys, "layers.*.mlp": SparseMixerMoe},
    tiny={"phimoe": TinyConfig("phimoe")},
    skips={
        "phimoe": {
            "neurons_make_contribution": "a mixture of experts",
        },
    },
)
