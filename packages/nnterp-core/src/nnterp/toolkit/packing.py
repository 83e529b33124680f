"""How many patching cells one forward carries: the memory a row takes, the caller's budget, and the packs.

A sweep's cells each run the corrupted prompts with one patch. Packed, a
forward carries many cells along the batch axis (the corrupted prompts
repeated once per cell, each copy with its own patch), so a sweep of
``layers x heads`` cells runs one forward per layer, or per budget's worth of
cells, instead of one per cell.

The memory a forward needs is estimated before anything runs, from the
model's sizes (``estimate_row_bytes``); the number of cells per forward is
the most the budget holds, never more than one layer's cells. A budget that
cannot hold one cell, or an explicit ``cells_per_forward`` it cannot hold, is
refused with the estimate named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..protocols import StandardModel

#: the default budget on a CPU, in bytes: a forward's activations, not the weights
CPU_BUDGET = 2 * 2**30

#: the share of the accelerator's free memory a sweep takes by default
ACCELERATOR_SHARE = 0.5


def _config_size(config: Any, *names: str) -> int | None:
    """The first of ``names`` the config sets to a positive int; the largest over its layers where they differ."""
    for name in names:
        try:
            value = getattr(config, name, None)
        except Exception:  # noqa: BLE001 - a size that varies by layer (transformers' per-layer configs) refuses a global read
            value = max(
                (getattr(layer, name, 0) or 0 for layer in getattr(config, "per_layer_config", None) or ()),
                default=None,
            )
        if isinstance(value, int) and value > 0:
            return value
    return None


def estimate_row_bytes(
    model: StandardModel, seq: int, dtype: torch.dtype | None = None, logit_positions: int | None = None
) -> int:
    """An upper estimate of what one prompt of ``seq`` tokens holds at once in a forward without gradients, in bytes.

    The logits (at ``logit_positions`` positions where the forward computes
    them at some alone, else at every one) and one copy a metric may make of
    them (a softmax), the key-value
    cache of every block, the stream and three tensors in flight beside it, and
    the larger of the attention's interior (queries, keys, values, scores and
    pattern) and the MLP's (gate, up and activation, top-k experts' on a
    mixture); everything times the dtype's size. The model's sizes come from its
    text config (``hidden_size``, ``intermediate_size``, ``num_attention_heads``).
    """
    config = model.text_config
    hidden = model.hidden_size
    heads = _config_size(config, "num_attention_heads", "n_head", "num_heads") or 1
    intermediate = _config_size(config, "intermediate_size", "ffn_dim", "n_inner") or 4 * hidden
    experts_per_token = _config_size(config, "num_experts_per_tok", "moe_topk", "top_k") or 0
    expert_width = _config_size(config, "moe_intermediate_size", "expert_intermediate_size") or intermediate
    intermediate = max(intermediate, experts_per_token * expert_width)
    itemsize = (dtype or model.dtype).itemsize
    logits = 2 * model.vocab_size * (seq if logit_positions is None else logit_positions)
    per_token = model.num_layers * 2 * hidden + 4 * hidden + max(3 * hidden + 2 * heads * seq, 3 * intermediate)
    return int((per_token * seq + logits) * itemsize)


def default_budget(model: StandardModel) -> int:
    """Bytes a sweep's forward may take: half the accelerator's free memory where the model is on one, else 2 GiB."""
    device = model.device
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * ACCELERATOR_SHARE)
    return CPU_BUDGET


def _mb(count: int) -> str:
    """Bytes as MB (kB below one MB), so two sizes a message sets side by side read apart."""
    return f"{count / 2**20:,.1f} MB" if count >= 2**20 else f"{count / 2**10:,.1f} kB"


@dataclass(frozen=True)
class Packing:
    """The plan of a packed sweep: ``cells`` cells, at most ``per_forward`` of them in one forward.

    ``row_bytes`` is the estimate for one prompt, ``cell_bytes`` for one cell
    (every prompt of the batch), ``budget`` what a forward may take.
    """

    per_forward: int
    cell_bytes: int
    budget: int

    def packs(self, cells: list, key: Any) -> list[list]:
        """``cells`` cut into packs in their order: a pack never mixes two values of ``key(cell)`` (a layer's cells go together)."""
        packs: list[list] = []
        for cell in cells:
            if packs and len(packs[-1]) < self.per_forward and key(packs[-1][-1]) == key(cell):
                packs[-1].append(cell)
            else:
                packs.append([cell])
        return packs


def plan(
    model: StandardModel,
    prompts: int,
    seq: int,
    *,
    cells_per_forward: int | None,
    memory_budget: int | None,
    logit_positions: int | None = None,
) -> Packing:
    """How many cells one forward carries, for a batch of ``prompts`` prompts of ``seq`` tokens; refuses what cannot fit.

    ``cells_per_forward`` fixes the number (checked against the budget);
    None takes the most the budget holds. ``memory_budget`` is in bytes; None
    takes ``default_budget(model)``.
    """
    if cells_per_forward is not None and (
        isinstance(cells_per_forward, bool) or not isinstance(cells_per_forward, int) or cells_per_forward < 1
    ):
        raise ValueError(
            f"cells_per_forward must be a positive int (or None to fit the memory budget), not {cells_per_forward!r}"
        )
    if memory_budget is not None and (
        isinstance(memory_budget, bool) or not isinstance(memory_budget, int) or memory_budget < 1
    ):
        raise ValueError(
            f"memory_budget is a number of bytes (e.g. 4 * 2**30 for 4 GiB), or None for the default, not {memory_budget!r}"
        )
    budget = default_budget(model) if memory_budget is None else memory_budget
    cell_bytes = estimate_row_bytes(model, seq, logit_positions=logit_positions) * prompts
    fits = budget // cell_bytes
    if fits < 1:
        raise MemoryError(
            f"one patching cell ({prompts} prompt(s) of {seq} tokens) is estimated at {_mb(cell_bytes)}, over the "
            f"memory budget of {_mb(budget)}: pass a larger memory_budget= (in bytes), or fewer or shorter prompts"
        )
    if cells_per_forward is not None and cells_per_forward > fits:
        raise MemoryError(
            f"cells_per_forward={cells_per_forward} is estimated at {_mb(cells_per_forward * cell_bytes)} a forward "
            f"({_mb(cell_bytes)} a cell), over the memory budget of {_mb(budget)}, which holds {fits}: pass "
            f"cells_per_forward={fits} or less, or a larger memory_budget= (in bytes)"
        )
    return Packing(per_forward=cells_per_forward or int(fits), cell_bytes=cell_bytes, budget=budget)
