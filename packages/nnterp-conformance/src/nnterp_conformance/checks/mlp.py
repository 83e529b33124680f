"""The MLP: its neurons through the down projection make its contribution."""

from __future__ import annotations

from typing import Any

import nnsight
from nnsight.intervention.interleaver import OutOfOrderError
from nnterp.identities import NEURONS_MAKE_CONTRIBUTION
from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from .base import Case, Gaps, check, expect_close, expect_holds, has_mlp, model_dtype, require


def _up_half(mlp: Any) -> Any:
    """What a gated MLP multiplies the activation by: ``up_proj``'s output, or the second half of a fused ``gate_up_proj``'s.

    A family whose MLP adds something to that projection before the product
    (Zamba2's LoRA adapters) says what it multiplies by with an ``up_half()`` method.
    """
    declared = getattr(type(mlp), "up_half", None)
    if callable(declared):
        return mlp.up_half().detach().clone()
    if "gate_proj" in mlp.__dict__ and "up_proj" in mlp.__dict__:
        return mlp.up_proj.output.detach().clone()
    if "gate_up_proj" in mlp.__dict__:
        return mlp.gate_up_proj.output.chunk(2, dim=-1)[1].detach().clone()
    return None


def _up_first(mlp: Any) -> bool:
    """Whether the MLP computes what it multiplies by before its activation (a fused ``gate_up_proj``; Beam's ``up_proj``)."""
    if "gate_up_proj" in mlp.__dict__:
        return True
    if "up_proj" not in mlp.__dict__:
        return False
    names = list(mlp.source.names)
    up = next((index for index, name in enumerate(names) if name.startswith("self_up_proj_")), None)
    act = next((index for index, name in enumerate(names) if name.startswith("self_act_fn_")), None)
    return up is not None and act is not None and up < act


def mlp_parts(mlp: Any, parts: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Inside a trace: ``mlp``'s ``parts`` of the MLP identity (``activation``, ``up``, ``neurons``), read in the order the MLP computes them.

    ``neurons`` brings ``projected`` (``down_proj`` called again on them) and
    ``output`` (what ``down_proj`` returned in the run) along.
    """
    found: dict[str, torch.Tensor] = {}
    first = _up_first(mlp)
    if "up" in parts and first:
        found["up"] = _up_half(mlp)
    if "activation" in parts:
        found["activation"] = mlp.mlp_activation.detach().clone()
    if "up" in parts and not first:
        found["up"] = _up_half(mlp)
    if "neurons" in parts:
        neurons = mlp.mlp_neurons
        found["neurons"] = neurons.detach().clone()
        found["projected"] = mlp.down_proj(neurons).detach().clone()
        found["output"] = mlp.down_proj.output.detach().clone()
    return found


def _neurons_run(model: StandardModel, case: Case, layer: int, parts: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Block ``layer``'s ``parts`` of the MLP identity (``activation``, ``up``, ``neurons``) in one trace, in the order the MLP computes them."""
    with torch.no_grad(), model.trace(case.batch):
        found = nnsight.save(mlp_parts(model.layers[layer].mlp, parts))
    return dict(found)


@check("mlp", applies=has_mlp)
def neurons_make_contribution(model: StandardModel, case: Case) -> str:
    """The neurons are the activation (times up_proj on a gated MLP), and down_proj of them is what it returns in the run."""
    blocks = require(model, "mlp.mlp_activation", "mlp.mlp_neurons")
    gaps = Gaps()
    for layer in blocks:
        try:
            found = _neurons_run(model, case, layer, ("activation", "up", "neurons"))
        except OutOfOrderError:
            # the family reads them out of the MLP's order: one trace each, so the identity, not the order, is what fails
            found = {
                key: value
                for part in ("activation", "up", "neurons")
                for key, value in _neurons_run(model, case, layer, (part,)).items()
            }
        up = found.get("up")
        expected = found["activation"] if up is None else found["activation"] * up
        formula = "mlp_activation" if up is None else "mlp_activation * up_proj.output"
        judged = coarsest(
            found["neurons"], model_dtype(model)
        )  # neurons upcast from half-precision projections round as they do
        gaps.add(
            expect_close(f"layers[{layer}]: {formula} against mlp_neurons", found["neurons"], expected, dtype=judged)
        )
        # a family serving token-flat neurons per row ([batch, seq, ...]) projects them in that layout
        projected, output = found["projected"], found["output"]
        projected = projected.reshape(output.shape) if projected.numel() == output.numel() else projected
        gaps.add(
            expect_holds(
                NEURONS_MAKE_CONTRIBUTION,
                f"layers[{layer}]: down_proj(mlp_neurons) against down_proj's output",
                output,
                projected,
            )
        )
    return str(gaps)
