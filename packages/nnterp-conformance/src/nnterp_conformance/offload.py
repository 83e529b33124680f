"""The kit across a split: every check on a checkpoint dispatched over two devices by accelerate, and its agreement with one device.

``nnterp-conformance check llama --offload`` loads the checkpoint with an
explicit ``device_map`` (``split_map``; ``--offload cuda:0,cuda:1`` for two GPUs): everything outside the blocks and
the first half of the blocks on the CPU, the second half offloaded to disk,
so that accelerate's hooks load those blocks' weights from disk at each
forward and the stream crosses a device boundary between two blocks. It runs
every check on that model and compares it with the same checkpoint loaded on
one device, as the tensor-parallel run does (``agreement``). On GPUs the same
hooks move the stream between ``cuda:0`` and ``cuda:1``; that has not run here.
"""

from __future__ import annotations

import tempfile
from typing import Any


def split_map(model: Any, first: str = "cpu", second: str = "disk") -> dict[str, str]:
    """A ``device_map`` for ``model``'s checkpoint: the first half of its blocks and everything else on ``first``, the rest on ``second``.

    Keys are the module names of the HuggingFace model (``model.layers.2``,
    ``lm_head``): each block by its own name, every parameter or buffer outside
    the blocks by the module that holds it.
    """
    hf = model._module
    names = {id(module): name for name, module in hf.named_modules()}
    blocks = [names[id(model.layers[index]._module)] for index in range(model.num_layers)]
    placement = {name: first if index < (len(blocks) + 1) // 2 else second for index, name in enumerate(blocks)}
    for name, _ in [*hf.named_parameters(remove_duplicate=False), *hf.named_buffers(remove_duplicate=False)]:
        owner = name.rpartition(".")[0]
        if not any(owner == block or owner.startswith(block + ".") for block in blocks):
            placement.setdefault(owner, first)
    return placement


def offloaded(checkpoint: str, whole: Any, devices: tuple[str, str] = ("cpu", "disk")) -> Any:
    """``checkpoint`` loaded with ``split_map(whole, *devices)``, weights offloaded to disk in a fresh temporary folder."""
    from .runner import load

    folder = tempfile.mkdtemp(prefix="nnterp-offload-")
    return load(checkpoint, device_map=split_map(whole, *devices), offload_folder=folder, dispatch=True)


def offloaded_record(
    checkpoint: str, only: list[str] | None = None, devices: tuple[str, str] = ("cpu", "disk")
) -> dict:
    """The checks' verdicts on ``checkpoint`` split over ``devices``, and its agreement with one device."""
    from .agreement import record
    from .runner import load

    whole = load(checkpoint)
    split = offloaded(checkpoint, whole, devices)
    found = record(whole, split, "offloaded", only)
    found["device_map"] = dict(split._module.hf_device_map)
    return found
