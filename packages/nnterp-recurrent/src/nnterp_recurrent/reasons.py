"""Why a recurrent mixer's value is unavailable: each reason once, with what to do about it."""

from __future__ import annotations

from typing import Any


def needs_recurrent_routing(envoy: Any) -> str | None:
    """Why the state after each token is unavailable: the prompt's kernel is not the token-by-token one."""
    if envoy.routing() == "torch":
        return None
    return (
        "the state after each token exists only inside the token-by-token kernel, and this family's prompts "
        "run through its chunked kernel, which carries the state between chunks; call "
        "nnterp_recurrent.route_kernels(model.family, 'torch') before tracing (slower on long prompts)"
    )
