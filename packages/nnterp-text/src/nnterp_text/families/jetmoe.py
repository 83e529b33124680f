"""JetMoE: the default block, its MLP a mixture whose experts are two ``ParallelExperts`` fed tokens sorted by expert.

The ``router`` (a module around a linear ``layer``) takes the top-k of the
raw logits and softmaxes only those, as GPT-OSS's does (``TopKFirstMoe``),
then sorts the (token, slot) pairs by expert. The routing values are read
inside the router, before the sort, where everything after them follows
what is written: ``expert_indices`` is the top-k's indices (the per-expert
counts and the sort are made from them), ``expert_weights`` the softmaxed
top-k (gathered into the sorted order next). ``routed_output`` is the
experts' weighted sum, which is also ``mixture_output`` (there is no shared
expert); the module then adds its own ``bias`` to every token, so
``mlp_output = mixture_output + bias``. The weighted slot outputs exist only
in the sorted order, so ``expert_outputs`` says so.
"""

from nnterp import Attention, TinyConfig, TopKFirstMoe, unavailable
from nnterp.components.mlp import MIXTURE
from nnterp.families import default

#: ``layer_output.view(bsz, length, hidden)``: the experts' weighted sum, before the module adds its bias
SUM = "source.layer_output_view_0.output"

SORTED = (
    "JetMoE's experts hold each (token, slot) output in the order the router sorted the slots by expert, "
    "never as [token, slot]: read mlp.source.expert_outputs_1.output (weighted, sorted) and un-sort it with "
    "the router's first output (index_sorted_experts: row i is flat slot token * top_k + slot)"
)


class JetMoeMoe(TopKFirstMoe):
    """GPT-OSS's top-k-first mixture, read inside JetMoE's sorting router; its bias added after the experts."""

    #: the experts' sum is an operation of this forward, read after the router runs: instrument it when built
    sourced = True

    #: the call of the router's linear ``layer``, as an operation of the router's forward: every routing value
    #: is then read inside one instrumented forward, in its order (the module's own output would be read
    #: before the forward is instrumented for the values after it)
    LOGITS = "router.source.self_layer_0"
    expert_weights = TopKFirstMoe.expert_weights.at("router.source.type_as_0.output", select=None)
    expert_indices = TopKFirstMoe.expert_indices.at("router.source.logits_topk_0.output", select=1)
    expert_outputs = unavailable(SORTED)
    mlp_activation = unavailable(MIXTURE)
    mlp_neurons = unavailable(MIXTURE)
    routed_output = TopKFirstMoe.routed_output.at(SUM)
    mixture_output = TopKFirstMoe.mixture_output.at(SUM, select=None)

    def no_mixture(self) -> str | None:
        """Every JetMoE MLP routes: its experts are ``input_linear`` and ``output_linear``, not one ``experts`` module."""
        return None


class JetMoeAttention(Attention):
    """A mixture of attention heads: each token's top-k attention experts make its queries and project its outputs.

    The interface receives ``top_k`` query groups per token and the keys and
    values repeated once per group, and the experts' ``reduce`` projects each
    slot's head outputs and sums them: there is no ``o_proj`` module.
    """

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads as the interface receives them: the projected ones, repeated once per routing slot."""
        return self._module.num_key_value_heads * self._module.top_k


FAMILY = default.FAMILY.replace(
    name="jetmoe",
    model_types=("jetmoe",),
    rename={**default.FAMILY.rename, "self_attention": "self_attn"},
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": JetMoeAttention, "layers.*.mlp": JetMoeMoe},
    tiny={"jetmoe": TinyConfig("jetmoe")},
    skips={
        "jetmoe": {
            "head_outputs_make_the_projection": "no block with head outputs projects them through an o_proj module",
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "JetMoE's experts hold each",
        },
    },
)
