"""The ``kernels`` library's function modules, seen through to the transformers kernel dispatchers they stand for.

Where ``kernels`` is installed, transformers' ``use_kernel_forward_from_hub``
turns each kernel function of a modeling module (``torch_chunk_gated_delta_rule``)
into an instance of a ``Func`` module whose ``forward`` calls the function
(unless ``kernelize`` gave the calling layer a hub kernel for it). nnsight
cannot drill into a call of a module (``.source`` raises
``SourceNotAvailable``), so every value read inside a recurrent kernel would be
lost. ``see_through`` binds each such name of a modeling module back to the
function its ``Func`` calls, before nnsight instruments the forward that
calls it: the same function runs, and the values inside it are reachable.
``restore`` undoes it (both live in ``nnterp_recurrent._patches``, with the
package's other patch of transformers). A layer that ``kernelize`` gave a hub
kernel runs other code than transformers' torch function, so
``hub_kernel_in`` names it and the mixer refuses the load.

Deleted by an upstream change in either library: ``kernels`` keeping the
function itself at the module's name (wrapping it only when ``kernelize``
selects a hub kernel), or nnsight drilling into a module's ``forward`` from
the call site.
"""

from __future__ import annotations

import torch

from ._patches import SEEN_THROUGH as SEEN_THROUGH  # the patch itself: nnterp_recurrent._patches
from ._patches import restore as restore
from ._patches import see_through as see_through
from ._patches import stands_for as stands_for


class HubKernelInUse(RuntimeError):
    """A recurrent mixer's layer runs a hub kernel ``kernelize`` chose, not the function transformers wrote."""


def hub_kernel_in(layer: torch.nn.Module) -> str | None:
    """The kernel function ``kernelize`` gave ``layer`` a hub kernel for (a ``forward`` of its own on the layer's
    private function module), or None where every one runs the function transformers wrote."""
    for name, function_module in getattr(layer, "_kernel_funcs", {}).items():
        if "forward" in vars(function_module):
            return name
    return None


def seen_through(layer: torch.nn.Module) -> None:
    """Make the kernels ``layer``'s forward calls reachable (``see_through`` its modeling module); ``HubKernelInUse``
    where ``kernelize`` gave it a hub kernel, whose values nnterp cannot read."""
    import sys

    see_through(sys.modules[type(layer).__module__])
    name = hub_kernel_in(layer)
    if name is not None:
        raise HubKernelInUse(
            f"{type(layer).__name__} runs a hub kernel for {name} (the model was loaded with use_kernels=True and "
            "kernelize chose one): nnterp reads a recurrent mixer's values inside the function transformers wrote; load "
            "with use_kernels=False, or set USE_HUB_KERNELS=0"
        )
