"""Llama 4: the default block, its MLP (``feed_forward``) a mixture whose experts run on every token, their inputs pre-scaled.

The ``router`` is a linear layer whose forward takes the top-k of its
logits, scatters them into a dense ``[tokens, num_experts]`` tensor (minus
infinity elsewhere) and applies a sigmoid: ``router_scores``, zero off the
chosen experts. Every expert then runs on every token, its *input* multiplied
by that score, and the outputs are summed over experts; the shared expert's
output is added to that sum in place. So:

- ``router_logits`` is the linear's output (``super().forward``): the top-k
  and the scores follow what is written;
- ``expert_indices`` is the top-k's indices: a written index moves that
  slot's top logit, so its score, onto the new expert;
- ``expert_weights`` and ``expert_outputs`` do not exist: a score multiplies
  the expert's input, not its output, and the outputs are held per expert
  over all tokens, not per slot;
- ``routed_output`` is the sum over experts, ``shared_expert_output`` the
  shared expert's output. The mixture adds the sum into that very tensor in
  place, which would rebase a view of it onto the sum (no gradient reaching the
  rows served, their numbers turned into the mixture's output): the mixture is
  handed the shared expert's numbers as a tensor of their own, differentiated
  through the rows served (``gradient_through``), so the value read keeps the
  shared expert's output and a backward reaches it; edits land as on any value.

The mixture returns ``(out, router_logits)`` with ``out`` flat over tokens,
so ``mlp_output`` is served as ``[batch, seq, hidden]`` like the routing values.
"""

from nnterp import Moe, TinyConfig, TokenEProperty
from nnterp.descriptors import gradient_through
from nnterp.families import default
from nnterp.layouts import Residual

from torch import Tensor

INPUT_SCALED = (
    "Llama 4 multiplies each expert's input by its sigmoid score, not its output, and holds the scores "
    "dense over all experts: read or write mlp.router.output[0] ([tokens, num_experts], zero off the "
    "chosen experts) instead"
)
PER_EXPERT = (
    "Llama 4 runs every expert on every token (its input scaled by its score), so outputs are held per "
    "expert, not per slot: read mlp.experts.output viewed as [num_experts, tokens, hidden_size] "
    "(zero for the experts a token did not choose) instead"
)


def _mixed(reason: str):
    """``reason`` on a mixture block, the dense reason on a dense one."""
    return lambda envoy: envoy.no_mixture() or reason


class Llama4Moe(Moe):
    """A top-k-first sigmoid mixture whose scores scale the experts' inputs; its output flat over tokens."""

    #: the experts' sum is an operation of this forward, read after the router runs: instrument it when built
    sourced = True

    LOGITS = "router.source.forward_0"
    SCORING = "sigmoid"
    TOPK_FIRST = True
    NORMALIZE = False

    @TokenEProperty("output", "What the MLP adds to the residual stream", select=0)
    def mlp_output(self, value: Tensor) -> Residual:
        """The MLP's contribution to the residual stream, ``[batch, seq, hidden_size]``. In-place edits and assignment reach the model."""
        return value

    expert_indices = Moe.expert_indices.at("router.source.torch_topk_0.output", select=1)
    expert_weights = Moe.expert_weights.at(unavailable=_mixed(INPUT_SCALED))
    expert_outputs = Moe.expert_outputs.at(unavailable=_mixed(PER_EXPERT))
    routed_output = Moe.routed_output.at("source.sum_0.output")
    shared_expert_output = Moe.shared_expert_output.at()

    @shared_expert_output.transform
    def shared_expert_output(self, view: Tensor, served: Tensor) -> Tensor:
        # ``out = self.shared_expert(...)`` then ``out.add_(routed sum)``: an in-place add on a view of the served rows
        # rebases it onto the flat tensor, beside the rows. A tensor of its own (the model's numbers, edits included,
        # as the rows share its storage) differentiated through the rows is added into instead; a copy without gradients.
        through = gradient_through(served, view, 1.0)
        return served.clone() if through is served else through


FAMILY = default.FAMILY.replace(
    name="llama4_text",
    model_types=("llama4_text",),
    rename={
        **default.FAMILY.rename,
        "feed_forward": "mlp",
        "shared_expert": "shared_experts",
        "activation_fn": "act_fn",
    },
    envoys={**default.FAMILY.envoys, "layers.*.mlp": Llama4Moe},
    tiny={
        "llama4_text": TinyConfig("llama4_text"),
        # a dense first block and two mixtures
        "llama4_text-dense": TinyConfig("llama4_text", {"num_hidden_layers": 3, "moe_layers": [1, 2]}),
    },
    skips={
        "llama4_text": {
            "neurons_make_contribution": "a mixture of experts",
            "rerouted_slot_runs_the_new_expert": "Llama 4 multiplies each expert's input by its sigmoid score, not its",
            "zeroed_slot_leaves_the_sum": "Llama 4 multiplies each expert's input by its sigmoid score, not its",
        },
        "llama4_text-dense": {
            "rerouted_slot_runs_the_new_expert": "this block's MLP is dense",
            "zeroed_slot_leaves_the_sum": "this block's MLP is dense",
        },
    },
)
