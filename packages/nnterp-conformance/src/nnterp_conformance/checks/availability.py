"""Availability: what support() reports is what a trace finds, value by value, block by block."""

from __future__ import annotations

import typing
from typing import Any

from nnterp import Unavailable, blocks_support
from nnterp.layouts import dims, expected_shape
from nnterp.protocols import StandardModel

import torch

from .base import Case, CheckFailure, check, get, input_shape


def may_be_none(value: Any) -> bool:
    """Whether a value's definition says it can be None (``State | None``: a state before any call)."""
    function = getattr(value, "_preprocess", None)
    if function is None:
        return False
    return type(None) in typing.get_args(typing.get_type_hints(function).get("return"))


def _block_values(model: StandardModel) -> list[tuple[str, Any]]:
    return list(blocks_support(model.layers).items())


@check("availability")
def available_values_resolve(model: StandardModel, case: Case) -> str:
    """Every value support() reports available resolves on every block, one trace per value, in the shape its layout names."""
    shape = input_shape(model, case)
    count = 0
    for name, reasons in _block_values(model):
        blocks = [layer for layer in range(model.num_layers) if not reasons or layer not in reasons]
        if not blocks:
            continue
        found: list = []
        with torch.no_grad(), model.trace(case.batch):
            for layer in blocks:
                value = get(model.layers[layer], name)
                found.append(value if value is None else value.detach().clone())
        host, _, value = f"x.{name}".rpartition(".")
        for layer, tensor in zip(blocks, found):
            envoy = get(model.layers[layer], host[2:]) if host != "x" else model.layers[layer]
            served = type(envoy).values()[value]
            if tensor is None:
                if not may_be_none(served):
                    raise CheckFailure(f"layers[{layer}].{name}: read None, but its layout says it is always a tensor")
                count += 1
                continue
            layout = served.layout
            if layout is None:
                continue
            expected = expected_shape(envoy, layout, shape)
            if tuple(tensor.shape) != expected:
                raise CheckFailure(
                    f"layers[{layer}].{name}: shape {tuple(tensor.shape)}, but its layout {dims(layout)} names {expected}"
                )
            count += 1
    return f"{count} values resolved in the shapes their layouts name"


@check("availability")
def unavailable_values_raise(model: StandardModel, case: Case) -> str:
    """Every value support() reports unavailable raises Unavailable with the same reason, before the model runs."""
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    checked = 0
    try:
        for name, reasons in _block_values(model):
            for layer, reason in (reasons or {}).items():
                calls.clear()
                try:
                    with model.trace(case.batch):
                        get(model.layers[layer], name)
                except Unavailable as error:
                    if error.reason != reason:
                        raise CheckFailure(
                            f"layers[{layer}].{name}: raised {error.reason!r}, but support() says {reason!r}"
                        ) from error
                    if calls:
                        raise CheckFailure(
                            f"layers[{layer}].{name}: Unavailable came only after the model ran"
                        ) from error
                    checked += 1
                    continue
                raise CheckFailure(f"layers[{layer}].{name}: support() says {reason!r}, yet the read did not raise")
    finally:
        hook.remove()
    return f"{checked} unavailable (value, block) pairs raised their reason before the model ran"
