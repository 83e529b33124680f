"""Gradients of the image's values: what ``.grad`` reads inside ``backward()`` on the tower, its blocks and the projector
is the metric's derivative, on the case's image batch.

The values the logits cannot depend on are known before the run from what the
wrapper declares: the tower blocks past the stream its projector selects
(LLaVA's ``vision_feature_layer=-2`` leaves the last block unread), and the
tower's ``tower_output`` where the selection is a block's stream instead.
"""

from __future__ import annotations

from typing import Any

from nnterp.descriptors import declared_values
from nnterp.protocols import VisionModel

from .base import Case, Skip, check
from .gradients import derivatives_gaps, interior_gradients, left_out
from .vision import has_vision, image_inputs, image_token


def reached_blocks(model: VisionModel) -> tuple[int, bool, str]:
    """The last tower block whose values reach the logits, whether ``tower_output`` does, and the declaration saying so.

    Read off the projector's ``selection()``: a block's ``layer_output``
    selected reaches through that block (``layers.0.layer_input``, the
    embeddings, through none), ``tower_output`` through every block; a
    selection the tower's own adapter makes (a string: Llama 4's, GLM-4V's
    merger) is past the last block, so everything reaches.
    """
    last = model.vision.num_layers - 1
    projector = model.__dict__.get("projector")
    selection = projector.selection() if projector is not None else ()
    if isinstance(selection, str) or not selection:
        return last, True, "the wrapper hands the tower's whole output on"
    through, tower = -1, False
    for chosen in selection:
        parts = chosen.value.split(".")
        if chosen.value == "tower_output":
            through, tower = last, True
        elif parts[0] == "layers" and parts[1].isdigit():
            through = max(through, int(parts[1]) - (parts[2] == "layer_input"))
        else:
            return last, True, f"the projector reads vision.{chosen.value}"
    said = ", ".join(f"vision.{chosen.value}" for chosen in selection)
    return through, tower, f"the projector's selection() reads {said}"


def tower_plan(model: VisionModel) -> tuple[list[str], dict[str, str]]:
    """Every available value of the tower, its blocks and the projector the logits depend on, as paths below the model
    (``"vision.layers.1.mlp.mlp_neurons"``); and why each left out is, by its declaration or the projector's selection."""
    from nnterp.toolkit.cache import block_order

    through, tower, said = reached_blocks(model)
    unread = f"past the tower stream the wrapper selects ({said}): the logits do not depend on it"
    taken: list[str] = []
    left: dict[str, str] = {}

    def own(root: Any, prefix: str) -> None:
        for name, value in declared_values(type(root)).items():
            if value.reason(root) is not None:
                continue
            reason = unread if (prefix, name) == ("vision.", "tower_output") and not tower else left_out(value)
            if reason is None:
                taken.append(f"{prefix}{name}")
            else:
                left.setdefault(f"{prefix}{name}", reason)

    own(model.vision, "vision.")
    for layer in range(model.vision.num_layers):
        support = model.vision.support(layer=layer)
        block = model.vision.layers[layer]
        for name in block_order(block):
            if support.get(name, "unknown") is not None:
                continue
            host, _, attribute = f".{name}".rpartition(".")
            value = type(block if not host else getattr(block, host[1:])).values()[attribute]
            reason = unread if layer > through else left_out(value)
            if reason is None:
                taken.append(f"vision.layers.{layer}.{name}")
            else:
                left.setdefault(f"vision.layers.*.{name}", reason)
    if "projector" in model.__dict__:
        own(model.projector, "projector.")
    return taken, left


@check("gradients", applies=has_vision, drawn=False)
def tower_gradients_are_derivatives(model: VisionModel, case: Case) -> str:
    """On the image batch, .grad read inside backward() on every floating value of the tower, its blocks and the projector equals torch.autograd.grad of the same metric."""
    image_token(model, case)  # Skip where the load takes no image
    plan, left = tower_plan(model)
    if not plan:
        raise Skip("the tower serves no value the logits depend on" + (f" ({len(left)} left out)" if left else ""))
    prompts, images = image_inputs(model, case)
    # a worker per value: the tower, the projector and the scatter serve theirs in each wrapper's own order
    found = interior_gradients(model, (prompts, {"images": images}), plan, separate=True)
    return f"{len(found[0])} values; " + derivatives_gaps(model, found, left)
