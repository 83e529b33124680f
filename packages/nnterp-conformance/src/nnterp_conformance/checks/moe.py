"""Mixtures of experts: the routing values mean what they say, and writing them changes what runs.

These run on every checkpoint with a ``Moe`` block that routes (``no_mixture``
is None) and are not reported on the others.
"""

from __future__ import annotations

from typing import Any

from nnterp.protocols import StandardModel
from nnterp.tolerances import BATCH_TOLERANCE, coarsest

import torch

from .base import Case, CheckFailure, Gaps, Skip, check, expect_close, input_shape, model_dtype, read, require


def _mixtures(model: StandardModel) -> list[int]:
    """The blocks whose MLP is a routing ``Moe``."""
    found = []
    for layer in range(model.num_layers):
        mlp = model.layers[layer].__dict__.get("mlp")
        if mlp is not None and callable(getattr(type(mlp), "no_mixture", None)) and mlp.no_mixture() is None:
            found.append(layer)
    return found


def is_mixture(model: StandardModel) -> bool:
    """Whether any block of ``model`` routes tokens through a mixture of experts."""
    return bool(_mixtures(model))


def _one(model: StandardModel, case: Case, layer: int, name: str, edit: Any = None) -> torch.Tensor:
    """``name`` on block ``layer`` in a trace of its own, after ``edit(mlp)`` where given."""
    with torch.no_grad(), model.trace(case.batch):
        mlp = model.layers[layer].mlp
        if edit is not None:
            edit(mlp)
        value = getattr(mlp, name).detach().clone().save()
    return value


def _by_expert(weights: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots put in the order of their experts, so two routings that chose alike compare slot by slot."""
    order = indices.argsort(-1)
    return weights.float().gather(-1, order), indices.gather(-1, order)


@check("moe", applies=is_mixture)
def mixture_adds_up(model: StandardModel, case: Case) -> str:
    """routed_output + shared_expert_output is mixture_output (mlp_output unless a norm follows), and expert_outputs summed is routed_output."""
    gaps = Gaps()
    for layer in require(model, "mlp.routed_output", "mlp.mixture_output"):
        routed = _one(model, case, layer, "routed_output")
        total = routed
        if model.layers[layer].mlp.support()["shared_expert_output"] is None:
            total = routed + _one(model, case, layer, "shared_expert_output")
        output = _one(model, case, layer, "mixture_output")
        formula = "routed_output + shared_expert_output" if total is not routed else "routed_output (no shared expert)"
        gaps.add(expect_close(f"layers[{layer}]: {formula} against mixture_output", total, output))
        if model.layers[layer].mlp.support()["expert_outputs"] is None:
            slots = _one(model, case, layer, "expert_outputs")
            gaps.add(
                expect_close(f"layers[{layer}]: expert_outputs.sum(2) against routed_output", slots.sum(2), routed)
            )
    return str(gaps)


@check("moe", applies=is_mixture)
def routing_follows_scoring(model: StandardModel, case: Case) -> str:
    """The weights and indices the experts receive are what the family's scoring makes of router_logits."""
    gaps = Gaps()
    for layer in require(model, "mlp.router_logits", "mlp.expert_indices"):
        mlp = model.layers[layer].mlp
        logits = _one(model, case, layer, "router_logits")
        indices = _one(model, case, layer, "expert_indices")
        # a family whose experts take no per-slot weights (Llama 4) is checked on its choices alone
        weighed = mlp.support()["expert_weights"] is None
        weights = _one(model, case, layer, "expert_weights") if weighed else torch.zeros(indices.shape)
        batch, seq = input_shape(model, case)
        expected_shapes = {"router_logits": (batch, seq, mlp.num_experts), "expert_indices": (batch, seq, mlp.top_k)}
        for name, value in (("router_logits", logits), ("expert_indices", indices)):
            if tuple(value.shape) != expected_shapes[name]:
                raise CheckFailure(
                    f"layers[{layer}].mlp.{name}: shape {tuple(value.shape)}, expected {expected_shapes[name]}"
                )
        routed_weights, routed_indices = mlp.route(logits)
        weights, indices = _by_expert(weights, indices)
        routed_weights, routed_indices = _by_expert(routed_weights, routed_indices)
        chose = (indices == routed_indices).all(-1)
        if not chose.all():
            where = tuple(chose.logical_not().nonzero()[0].tolist())
            raise CheckFailure(
                f"layers[{layer}]: at [batch, seq] {where} the experts received {indices[where].tolist()}, "
                f"the {mlp.SCORING} scoring of router_logits chooses {routed_indices[where].tolist()}"
            )
        if weighed:
            # judged by the router's dtype: a half-precision router scores half-precision logits, rounding once at least
            judged = coarsest(logits, weights, model_dtype(model))
            gaps.add(
                expect_close(
                    f"layers[{layer}]: expert_weights against route(router_logits)",
                    weights,
                    routed_weights,
                    dtype=judged,
                )
            )
        else:
            gaps.add(0.0)
    return str(gaps)


@check("moe", applies=is_mixture)
def written_logits_reroute(model: StandardModel, case: Case) -> str:
    """Raising one expert's router_logits makes every token route to it: the router scores what is written."""
    blocks = require(model, "mlp.router_logits", "mlp.expert_indices")
    layer = case.pick(blocks)
    routable = model.layers[layer].mlp.routable_experts()
    expert = routable[min(int(case.head * len(routable)), len(routable) - 1)]

    def favour(mlp: Any) -> None:
        logits = mlp.router_logits
        changed = logits.clone()
        changed[..., expert] = logits.max() + 20
        mlp.router_logits = changed

    before = _one(model, case, layer, "expert_indices")
    after = _one(model, case, layer, "expert_indices", favour)
    missed = (after == expert).any(-1).logical_not()
    if missed.any():
        raise CheckFailure(
            f"layers[{layer}]: after router_logits favoured expert {expert}, {int(missed.sum())} of "
            f"{missed.numel()} tokens still route elsewhere"
        )
    changed = int((before == expert).any(-1).logical_not().sum())
    return f"layers[{layer}]: expert {expert} now chosen by every token ({changed} rerouted)"


def _block_with_slots(model: StandardModel, case: Case, names: tuple[str, ...], why: str) -> tuple[int, int]:
    """The case's block among those with ``names``, and its top_k; ``Skip`` when a token has one slot only."""
    layer = case.pick(require(model, *names))
    top_k = model.layers[layer].mlp.top_k
    if top_k < 2:
        raise Skip(f"one expert per token: {why}")
    return layer, top_k


def _zero_slots(slots: list[int]) -> Any:
    def edit(mlp: Any) -> None:
        weights = mlp.expert_weights.clone()
        weights[..., slots] = 0
        mlp.expert_weights = weights

    return edit


@check("moe", applies=is_mixture)
def zeroed_slot_leaves_the_sum(model: StandardModel, case: Case) -> str:
    """Zeroing one slot's weight removes exactly that slot's output: the edited and the complementary runs sum to the whole."""
    layer, top_k = _block_with_slots(
        model, case, ("mlp.expert_weights", "mlp.routed_output"), "no slot to keep while another is zeroed"
    )
    slot = min(int(case.head * top_k), top_k - 1)
    others = [other for other in range(top_k) if other != slot]
    whole = _one(model, case, layer, "routed_output")
    without = _one(model, case, layer, "routed_output", _zero_slots([slot]))
    only = _one(model, case, layer, "routed_output", _zero_slots(others))
    gaps = Gaps()
    gaps.add(
        expect_close(
            f"layers[{layer}]: routed_output without slot {slot} plus with it alone, against the whole",
            without + only,
            whole,
        )
    )
    if model.layers[layer].mlp.support()["expert_outputs"] is None:
        slots = _one(model, case, layer, "expert_outputs")
        # added back rather than subtracted: the difference of two near sums cancels to the rounding of the whole
        gaps.add(
            expect_close(
                f"layers[{layer}]: routed_output without slot {slot} plus expert_outputs[:, :, {slot}], against the whole",
                without + slots[:, :, slot],
                whole,
            )
        )
    return str(gaps)


@check("moe", applies=is_mixture)
def rerouted_slot_runs_the_new_expert(model: StandardModel, case: Case) -> str:
    """Writing a slot's index to another slot's expert makes it that expert's output, under the slot's own weight."""
    layer, _ = _block_with_slots(
        model, case, ("mlp.expert_indices", "mlp.expert_weights", "mlp.expert_outputs"), "no other slot to reroute to"
    )
    slot, source = 0, 1

    def reroute(mlp: Any) -> None:
        indices = mlp.expert_indices.clone()
        indices[..., slot] = indices[..., source]
        mlp.expert_indices = indices

    weights = _one(model, case, layer, "expert_weights").float()
    before = _one(model, case, layer, "expert_outputs")
    after = _one(model, case, layer, "expert_outputs", reroute)
    expected = before[:, :, source] * (weights[..., slot] / weights[..., source]).unsqueeze(-1).to(before.dtype)
    usable = weights[..., source].abs() > 1e-6
    gap = expect_close(
        f"layers[{layer}]: slot {slot} rerouted to slot {source}'s expert, against that expert's output under slot {slot}'s weight",
        after[:, :, slot][usable],
        expected[usable],
    )
    return f"layers[{layer}]: largest gap {gap:.3g}"


@check("moe", applies=is_mixture)
def token_rows_stay_apart(model: StandardModel, case: Case) -> str:
    """The token-flat values of a padded row match its prompt alone, and an edit under one invoke leaves the other's rows alone."""
    if len(case.prompts) < 2:
        raise Skip("needs a batch of at least two prompts")
    blocks = require(model, "mlp.router_logits", "mlp.routed_output")
    layer = case.pick(blocks)
    support = model.layers[layer].mlp.support()
    names = tuple(name for name in ("router_logits", "expert_weights", "routed_output") if support[name] is None)
    gaps = Gaps()
    together = read(model, case, [(layer, f"mlp.{name}") for name in names])
    for row in range(len(case.prompts)):
        alone = read(model, case.alone(row), [(layer, f"mlp.{name}") for name in names])
        length = alone[0].shape[1]
        for name, batched, single in zip(names, together, alone):
            gaps.add(
                expect_close(
                    f"layers[{layer}].mlp.{name}: row {row} of the batch against its prompt alone",
                    batched[row : row + 1, -length:].float(),
                    single.float(),
                    table=BATCH_TOLERANCE,
                    dtype=coarsest(single, model_dtype(model)),
                )
            )
    first, second = case.batch[0], case.batch[1]
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(first):
            mlp = model.layers[layer].mlp
            mlp.router_logits = torch.zeros_like(mlp.router_logits)
        with tracer.invoke(second):
            untouched = model.layers[layer].mlp.routed_output.detach().clone().save()
    second_alone = read(model, case.alone(1), [(layer, "mlp.routed_output")])[0]
    length = second_alone.shape[1]
    gaps.add(
        expect_close(
            f"layers[{layer}].mlp.routed_output of the second invoke, with router_logits zeroed in the first, against its prompt alone",
            untouched[:, -length:].float(),
            second_alone.float(),
            table=BATCH_TOLERANCE,
            dtype=coarsest(second_alone, model_dtype(model)),
        )
    )
    return str(gaps)
