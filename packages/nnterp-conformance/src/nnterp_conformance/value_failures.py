"""Each standard value of a loaded model asked alone: the values whose reason, or whose read, raises, and what raised.

``model.support()`` asks every value for its reason in one call, so one reason that
raises (a recurrent mixer's ``needs_recurrent_routing`` meeting a kernel
dispatcher the release changed) takes the whole table with it; and the kit's
``available_values_resolve`` stops at the first value whose read raises (an
operation the release moved). The upgrade radar's records ask each value alone
instead: one failing value is one finding, with its exception, and every other
value is still asked and read.
"""

from __future__ import annotations

from typing import Any

#: the sublayers whose values ``support()`` lists under a block, by their attribute (as ``nnterp.blocks_support`` does)
SUBLAYERS = ("self_attn", "linear_attn", "mlp")


def failure(error: BaseException, during: str, layers: list[int] | None = None) -> dict[str, Any]:
    """A failing value's record: the exception as ``Type: message``, what was being done, on which blocks, where it raised."""
    from .checks.base import raised_at

    return {
        "error": f"{type(error).__name__}: {error}",
        "while": during,
        "layers": layers,
        "raised at": raised_at(error),
    }


def support_by_value(model: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``model.support()``'s table with each value's reason asked alone, less the values whose reason raised; and those.

    The table has ``support()``'s shape (a root value: None or its reason; a block
    value: None, or ``{layer: reason}``). A block value whose reason raised on
    any block is left out of it and kept, with the first exception and every
    block it raised on, in the second mapping.
    """
    from nnterp.descriptors import declared_values

    table: dict[str, Any] = {}
    failing: dict[str, dict[str, Any]] = {}
    for name, value in declared_values(type(model)).items():
        try:
            table[name] = value.reason(model)
        except Exception as error:  # noqa: BLE001 - whatever a reason raises makes that value fail, and only it
            failing[name] = failure(error, "asking its reason")
    blocks, failing_blocks = _blocks(model)
    table.update(blocks)
    failing.update(failing_blocks)
    return table, failing


def _blocks(model: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The block values' part of ``support_by_value``."""
    from nnterp.components.standard import Standard

    rows: list[dict[str, str | None]] = []
    failing: dict[str, dict[str, Any]] = {}
    for layer in range(model.num_layers):
        block, row = model.layers[layer], {}
        for prefix, host in [("", block), *((f"{name}.", block.__dict__.get(name)) for name in SUBLAYERS)]:
            if not isinstance(host, Standard):
                continue
            for name, value in type(host).values().items():
                try:
                    row[prefix + name] = value.reason(host)
                except Exception as error:  # noqa: BLE001 - as above
                    failing.setdefault(prefix + name, failure(error, "asking its reason", []))["layers"].append(layer)
        rows.append(row)
    table: dict[str, Any] = {}
    for name in dict.fromkeys(name for row in rows for name in row):
        if name in failing:
            continue
        missing = f"no {name.split('.')[0]} module on this block"
        table[name] = {
            layer: row.get(name, missing) for layer, row in enumerate(rows) if row.get(name, missing) is not None
        } or None
    return table, failing


def failing_reads(model: Any, prompts: Any) -> dict[str, dict[str, Any]]:
    """The block values whose reason says they are available but whose read on ``prompts`` raises, each with what raised.

    One trace per value, over every block that has it, so a value that raises
    (an operation the release moved) is one finding and the next value is
    still read.
    """
    import torch

    from .checks.base import get

    blocks, _ = _blocks(model)
    failing: dict[str, dict[str, Any]] = {}
    for name, reasons in blocks.items():
        layers = [layer for layer in range(model.num_layers) if not reasons or layer not in reasons]
        if not layers:
            continue
        try:
            with torch.no_grad(), model.trace(prompts):
                for layer in layers:
                    get(model.layers[layer], name)
        except Exception as error:  # noqa: BLE001 - whatever the read raises makes that value fail, and only it
            failing[name] = failure(error, "reading it", layers)
    return failing
