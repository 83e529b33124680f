"""DBRX: the default block under DBRX's names, its attention and both norms wrapped in ``norm_attn_norm``, its ``ffn`` a mixture of experts.

``norm_attn_norm`` runs the input norm, the attention, the residual add and the
MLP's pre-norm, and returns the stream and the normed stream; the aliases reach
inside it, so the attention's contribution is ``attn``'s own output and the
stream between the sublayers is what ``norm_2`` is called with.

The mixture's ``router`` is a module around a linear ``layer`` (the logits are
its output); the scoring is the FFN's own ``route_tokens_to_experts``: softmax,
top-k, then the chosen weights divided by their p-norm, p being
``moe_normalize_expert_weights`` (1: renormalized to sum to one; None: kept).
The experts run their own loop over experts, so each slot's output is never
held: ``expert_outputs`` says so.
"""

from nnterp import Attention, Family, Layer, Moe, TinyConfig, unavailable

from torch import Tensor

OWN_LOOP = (
    "DBRX's experts run their own loop, one call of experts.mlp per expert chosen, so the slots' outputs are "
    "never held side by side: read experts.mlp's output at each call (that expert's tokens, before their "
    "weights) instead"
)


class DbrxMoe(Moe):
    """A softmax mixture whose top-k weights are divided by their p-norm (``moe_normalize_expert_weights``)."""

    LOGITS = "router.layer"
    expert_outputs = unavailable(OWN_LOOP)

    def normalizes(self) -> bool:
        return self._module.moe_normalize_expert_weights is not None

    def route(self, router_logits: Tensor) -> tuple[Tensor, Tensor]:
        weights, indices = router_logits.float().softmax(-1).topk(self.top_k, dim=-1)
        norm = self._module.moe_normalize_expert_weights
        if norm is not None:
            weights = weights / weights.norm(p=norm, dim=-1, keepdim=True)
        return weights, indices


#: DBRX's sizes, shrunk: its config nests the attention's and the FFN's
SIZES = {
    "n_layers": 3,
    "n_heads": 4,
    "max_seq_len": 256,
    "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0},
}
#: the mixture's sizes
FFN = {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}

FAMILY = Family(
    name="dbrx",
    model_types=("dbrx",),
    rename={
        "transformer.blocks": "layers",
        "transformer.wte": "embed_tokens",
        "transformer.norm_f": "norm",
        "norm_attn_norm.attn": "self_attn",
        "norm_attn_norm.norm_1": "input_layernorm",
        "norm_attn_norm.norm_2": "post_attention_layernorm",
        "attn.out_proj": "attn.o_proj",
        "ffn": "mlp",
    },
    envoys={"layers.*": Layer, "layers.*.norm_attn_norm.attn": Attention, "layers.*.ffn": DbrxMoe},
    tiny={
        "dbrx": TinyConfig("dbrx", {**SIZES, "ffn_config": FFN}),
        # an L2 norm of the top-k weights instead of L1
        "dbrx-l2": TinyConfig("dbrx", {**SIZES, "ffn_config": {**FFN, "moe_normalize_expert_weights": 2.0}}),
    },
    skips={
        "dbrx": {
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "DBRX's experts run their own loop, one call of experts.mlp per expert",
        },
        "dbrx-l2": {
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "DBRX's experts run their own loop, one call of experts.mlp per expert",
        },
    },
)
