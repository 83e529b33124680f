"""How far two computations of one value may drift, by dtype; every entry says why (the kit's checks and the proof at load judge by it).

A tolerance is relative: a difference passes when it is at most
``TOLERANCE[dtype] * scale``, with ``scale`` the largest magnitude of the value
compared (at least 1). Both sides of an identity are computed from the same
tensors, so what separates them is the order of additions and the kernels'
blocking, a few units in the last place per operation.
"""

import torch

TOLERANCE = {
    # eps is 1.2e-7; sums over a 64-wide stream reassociated, and a parallel
    # block adding its three terms in another order, stay within ~10 ulps.
    torch.float32: 1e-5,
    # eps is 9.8e-4; one rounding on each side of the identity plus the cast back.
    torch.float16: 4e-3,
    # eps is 7.8e-3; the same, at bfloat16's three significant digits.
    torch.bfloat16: 3e-2,
    # eps is 2.2e-16; kept generous for kernels that accumulate in float32 anyway.
    torch.float64: 1e-5,
}

#: a padded row against the same prompt alone: the attention sums over other
#: lengths and matmuls block differently, compounding across layers
BATCH_TOLERANCE = {dtype: 20 * tolerance for dtype, tolerance in TOLERANCE.items()}


def tolerance(dtype: torch.dtype, table: dict = TOLERANCE) -> float:
    """The relative tolerance for ``dtype`` (float32's for a dtype the table does not list)."""
    return table.get(dtype, table[torch.float32])


def difference(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """The largest absolute difference and the scale it is judged against."""
    actual, expected = actual.detach().double(), expected.detach().double()
    gap = (actual - expected).abs().max().item() if actual.numel() else 0.0
    scale = max(expected.abs().max().item() if expected.numel() else 0.0, 1.0)
    return gap, scale


def close(
    actual: torch.Tensor, expected: torch.Tensor, table: dict = TOLERANCE, dtype: torch.dtype | None = None
) -> tuple[bool, float, float]:
    """Whether ``actual`` matches ``expected`` within ``dtype``'s tolerance (``expected``'s by default); with the gap and the allowed gap."""
    gap, scale = difference(actual, expected)
    allowed = tolerance(dtype or expected.dtype, table) * scale
    return gap <= allowed, gap, allowed


def coarsest(*found: torch.Tensor | torch.dtype) -> torch.dtype:
    """The dtype with the widest tolerance among tensors' dtypes and dtypes: what a comparison over them is judged by.

    A block adding a half-precision sublayer to a float32 stream rounds as the half-precision term does; a value a
    model upcasts to float32 (its logits, its router's) after computing it from half-precision weights carries
    their rounding, so such a comparison also names the model's dtype (``checks.base.model_dtype``).
    """
    return max((item if isinstance(item, torch.dtype) else item.dtype for item in found), key=tolerance)


def computed_in(module: torch.nn.Module) -> torch.dtype:
    """The dtype a model computes in, by which a comparison over its values is judged: the coarsest of its floating weights'.

    Not its first weight's: a model that keeps its embeddings, norms and residual gates in float32 beside
    half-precision projections (Ergo's ``_keep_in_fp32_modules_strict``) computes its sublayers, and so its
    attention and routing, in half precision.
    """
    return coarsest(
        *{parameter.dtype for parameter in module.parameters() if parameter.is_floating_point()} or {torch.float32}
    )
