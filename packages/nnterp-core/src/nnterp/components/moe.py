"""A mixture of experts: routing read and written where the model consumes it, and each slot's output."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from ..descriptors import TokenEProperty
from ..layouts import ExpertIndices, ExpertOutputs, ExpertWeights, Residual, RouterLogits
from .mlp import DENSE, Mlp

#: the implementations of transformers' experts switch whose forward holds every slot's weighted output
GROUPED = ("grouped_mm", "batched_mm")

#: the call an experts module decorated with ``@use_experts_implementation`` makes to the chosen forward;
#: experts_forward_0 is the binding ``experts_forward = ...get_interface(...)``
EXPERTS_FORWARD = "experts_forward_1"

#: inside the grouped_mm and batched_mm forwards: ``weighted_out.view(tokens, top_k, hidden)``, summed next
WEIGHTED_SLOTS = f"experts.source.{EXPERTS_FORWARD}.source.weighted_out_view_0"

NO_SHARED = "this mixture has no shared expert: every expert is routed"
OWN_LOOP = (
    "this family's experts run their own loop over experts (no grouped_mm / batched_mm forward), "
    "which never holds the slots' outputs side by side"
)


def _first(module: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        value = getattr(module, name, None)
        if value is not None:
            return value
    return None


def mixture_reason(envoy: Any) -> str | None:
    """Why this module runs no mixture of experts, or None: the one place a family decides it (``Moe.no_mixture``)."""
    return envoy.no_mixture()


def needs_grouped_experts(envoy: Any) -> str | None:
    """Why the per-slot expert outputs are unavailable, or None: they exist only in the grouped_mm / batched_mm forwards."""
    reason = envoy.no_mixture()
    if reason is not None:
        return reason
    experts = envoy.experts_module()._module
    config = getattr(experts, "config", None)
    if config is None or not hasattr(type(experts), "_apply_gate"):
        return OWN_LOOP
    implementation = getattr(config, "_experts_implementation", None)
    if implementation in GROUPED:
        return None
    return (
        f"this model runs experts_implementation={implementation!r}, whose forward never holds the "
        "slots' outputs side by side; load with StandardizedTransformer(..., "
        "experts_implementation='grouped_mm') to read them"
    )


def no_shared_expert(envoy: Any) -> str | None:
    """Why ``shared_expert_output`` is unavailable on this mixture, or None: it has no shared expert."""
    reason = envoy.no_mixture()
    if reason is not None:
        return reason
    return None if envoy.__dict__.get("shared_experts") is not None else NO_SHARED


class Moe(Mlp):
    """A mixture of experts: its routing, each routed slot's output, and the shared expert's.

    ``mlp_output`` is what the block adds, as on any ``Mlp``. Its children
    under their standard names: ``router``, ``experts`` and
    ``shared_experts`` (a family aliases ``gate``, ``shared_expert``,
    ``shared_mlp`` ... in its ``rename``). The routing values are read where
    the model consumes them, so a write changes what runs:

    - ``router_logits`` at ``LOGITS``, the operation in the router's forward
      that makes them, before ``SCORING`` and any selection bias;
    - ``expert_weights`` and ``expert_indices``, the experts module's
      arguments at positions ``WEIGHTS`` and ``INDICES``;
    - ``expert_outputs`` inside transformers' grouped_mm / batched_mm experts
      forward; ``routed_output``, the experts' output;
    - ``mixture_output``, the routed and shared experts' sum: ``mlp_output``
      unless a norm follows the mixture.

    The model holds these flat over tokens (``[batch * seq, ...]``); they are
    served as ``[batch, seq, ...]`` and edits under several invokes stay in
    their rows. ``route(router_logits)`` is what the router makes of logits,
    by the family's scoring: the kit checks it against the weights and
    indices the experts receive.
    """

    lacks = "this block's MLP is a mixture of experts, whose values are its routing's and its experts'"

    # each a per-family setting: a mixture variant (``nnterp.components.mixtures``) or a family's Moe sets its own

    #: the path of the operation (in the router's forward) or module whose output is the logits:
    #: ``"router.source.F_linear_0"``, the router's linear, here
    LOGITS: ClassVar[str] = "router.source.F_linear_0"
    #: what turns logits into weights: ``"softmax"`` (here) or ``"sigmoid"`` (``SigmoidMoe``)
    SCORING: ClassVar[str] = "softmax"
    #: whether the router takes the top-k of the raw logits and scores only those: False here (``TopKFirstMoe``:
    #: GPT-OSS, Granite-MoE)
    TOPK_FIRST: ClassVar[bool] = False
    #: whether the chosen weights are renormalized to sum to one; None (here) reads the router's ``norm_topk_prob``
    NORMALIZE: ClassVar[bool | None] = None
    #: how a group of experts is scored for grouped routing: ``"top2"`` (the sum of its best two, here) or ``"max"``
    GROUP_SCORE: ClassVar[str] = "top2"
    #: the position of the indices among the experts module's arguments ``(hidden_states, indices, weights)``: 1
    INDICES: ClassVar[int] = 1
    #: the position of the weights among the experts module's arguments: 2
    WEIGHTS: ClassVar[int] = 2

    def no_mixture(self) -> str | None:
        """Why this module runs no mixture of experts, or None (every Moe module with an experts child does)."""
        return None if self.__dict__.get("experts") is not None else DENSE

    def experts_module(self) -> Any:
        """The envoy of the experts module: the ``experts`` child, unless the family hosts it elsewhere."""
        return self.experts

    # -- sizes -----------------------------------------------------------------------

    @property
    def num_experts(self) -> int:
        """Routed experts in this mixture: the router's or experts module's num_experts / num_local_experts / n_routed_experts."""
        names = ("num_experts", "num_local_experts", "n_routed_experts")
        for child in ("router", "experts"):
            envoy = self.__dict__.get(child)
            value = None if envoy is None else _first(envoy._module, names)
            if isinstance(value, int):
                return value
        return int(_first(self._module, names))

    @property
    def top_k(self) -> int:
        """Experts each token is routed to: the module's or router's top_k / num_experts_per_tok."""
        names = ("top_k", "num_experts_per_tok", "moe_topk")
        for module in (self._module, self.router._module):
            value = _first(module, names)
            if isinstance(value, int):
                return value
        return int(_first(self.root._module.config, names))

    # -- the values ------------------------------------------------------------------

    @TokenEProperty(lambda envoy: f"{envoy.LOGITS}.output", "The router's logits, before scoring", mixture_reason)
    def router_logits(self, value: Tensor) -> RouterLogits:
        """The router's logits, ``[batch, seq, num_experts]``, where the router's forward makes them.

        Before the scoring (``SCORING``) and any selection bias, so on a
        softmax router ``softmax(router_logits)`` is the routing distribution.
        Assign or edit in place: the router scores what is written, so the
        weights and indices follow.
        """
        return value

    @TokenEProperty(
        "experts.inputs",
        "The weight each routing slot's expert output is multiplied by",
        mixture_reason,
        select=lambda envoy: envoy.WEIGHTS,
    )
    def expert_weights(self, value: Tensor) -> ExpertWeights:
        """The weights the experts receive, ``[batch, seq, top_k]``, one per routing slot.

        After the router's normalization and scaling: what multiplies each
        slot's expert output. Zero ``[b, t, j]`` to remove slot ``j`` of token
        ``t``; ``w.masked_fill(expert_indices == e, 0)`` removes expert ``e``.
        """
        return value

    @TokenEProperty(
        "experts.inputs", "The expert each routing slot runs", mixture_reason, select=lambda envoy: envoy.INDICES
    )
    def expert_indices(self, value: Tensor) -> ExpertIndices:
        """The experts each token is routed to, ``[batch, seq, top_k]``, int64.

        Write an index to reroute that slot to another expert; its weight
        stays what the router gave the expert it chose.
        """
        return value

    @TokenEProperty(
        f"{WEIGHTED_SLOTS}.output", "Each slot's weighted expert output", needs_grouped_experts, summand=True
    )
    def expert_outputs(self, value: Tensor) -> ExpertOutputs:
        """Each slot's expert output times its weight, ``[batch, seq, top_k, hidden_size]``, before the slots are summed.

        ``expert_outputs.sum(2) == routed_output``. The model's own tensor in
        transformers' grouped_mm (the default) and batched_mm experts
        forwards, so edits reach the sum; unavailable under the eager loop.
        """
        return value

    @TokenEProperty("experts.output", "What the routed experts add up to", mixture_reason)
    def routed_output(self, value: Tensor) -> Residual:
        """The routed experts' sum, ``[batch, seq, hidden_size]``: ``expert_outputs.sum(2)``.

        ``routed_output + shared_expert_output`` is the mixture's output (and
        ``routed_output`` alone where there is no shared expert). In-place
        edits and assignment reach the model.
        """
        return value

    @TokenEProperty("shared_experts.output", "The shared expert's contribution", no_shared_expert)
    def shared_expert_output(self, value: Tensor) -> Residual:
        """The shared expert's contribution, ``[batch, seq, hidden_size]``, where the mixture has one.

        What the mixture adds to ``routed_output``: ``routed_output +
        shared_expert_output == mlp_output`` (before any scaling the block
        applies, as ``mlp_output`` is).
        """
        return value

    @TokenEProperty("output", "What the mixture hands on: its routed and shared experts' sum", mixture_reason, select=0)
    def mixture_output(self, value: Tensor) -> Residual:
        """The mixture's sum, ``[batch, seq, hidden_size]``: ``routed_output + shared_expert_output``.

        The module's own output, and so ``mlp_output`` itself, wherever no
        norm follows the sum; a block that normalizes the mixture before
        adding it (a post-sublayer norm, inside the module or out) reads
        ``mlp_output`` after the norm and this before it.
        """
        return value

    # -- what the router does -----------------------------------------------------------

    def routable_experts(self) -> list[int]:
        """The experts a raised logit can make the router choose: every one, unless the family holds one back."""
        return list(range(self.num_experts))

    def normalizes(self) -> bool:
        """Whether the chosen weights are renormalized to sum to one."""
        if self.NORMALIZE is not None:
            return self.NORMALIZE
        return bool(_first(self.router._module, ("norm_topk_prob",)))

    def scaling(self) -> float:
        """What the weights are multiplied by after normalization (the router's routed_scaling_factor), else 1."""
        value = _first(self.router._module, ("routed_scaling_factor", "route_scale", "router_scaling_factor"))
        return 1.0 if value is None else float(value)

    def selection_bias(self) -> Tensor | None:
        """What is added to the scores to choose the experts (not to weigh them), or None."""
        return _first(self.router._module, ("e_score_correction_bias",))

    def groups(self) -> tuple[int, int] | None:
        """``(groups, groups kept)`` for grouped routing, or None."""
        router = self.router._module
        groups, kept = _first(router, ("num_group", "n_group")), _first(router, ("topk_group",))
        if not groups or not kept or groups <= 1:
            return None
        return int(groups), int(kept)

    def route(self, router_logits: Tensor) -> tuple[Tensor, Tensor]:
        """What the router makes of ``router_logits`` (``[..., num_experts]``): ``(expert_weights, expert_indices)``.

        By the family's scoring: top-k of the scores (plus any selection bias,
        within the kept groups), weighed by the unbiased scores, renormalized
        and scaled as the router does; or, on a ``TOPK_FIRST`` router, the
        scores of the top-k logits. The slots come in the order the scores
        rank them, which may differ from the router's own slot order.
        """
        logits = router_logits.float()
        score = (lambda x: x.softmax(-1)) if self.SCORING == "softmax" else torch.sigmoid
        if self.TOPK_FIRST:
            top, indices = logits.topk(self.top_k, dim=-1)
            weights = score(top)
        else:
            scores = score(logits)
            choice = scores
            bias = self.selection_bias()
            if bias is not None:
                choice = choice + bias.float()
            grouping = self.groups()
            if grouping is not None:
                choice = self._within_kept_groups(choice, *grouping)
            indices = choice.topk(self.top_k, dim=-1).indices
            weights = scores.gather(-1, indices)
        if self.normalizes():
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return weights * self.scaling(), indices

    def _within_kept_groups(self, choice: Tensor, groups: int, kept: int) -> Tensor:
        grouped = choice.unflatten(-1, (groups, -1))
        group_scores = grouped.max(-1).values if self.GROUP_SCORE == "max" else grouped.topk(2, dim=-1).values.sum(-1)
        keep = torch.zeros_like(group_scores, dtype=torch.bool)
        keep.scatter_(-1, group_scores.topk(kept, dim=-1).indices, True)
        return grouped.masked_fill(~keep.unsqueeze(-1), float("-inf")).flatten(-2)
