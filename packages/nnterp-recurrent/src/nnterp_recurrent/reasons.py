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


def needs_torch_kernels(envoy: Any) -> str | None:
    """Why a value read inside the kernels' own bodies is unavailable: they are not bound to the pure-torch functions."""
    if envoy.routing() == "torch":
        return None
    return (
        "the kernels are a compiled package's (mamba_ssm), with no Python source to read inside; call "
        "nnterp_recurrent.route_kernels(model.family, 'torch') before tracing to run transformers' pure-torch ones"
    )


#: why a chunked kernel's last state is beside the graph (``EProperty.off_the_graph``): this call's outputs are
#: computed without it, it only goes on to the cache
HANDED_ON = (
    "the state after the last token is only handed on to the cache: this call's outputs are computed beside it, so "
    "its logits do not depend on it (assigning it changes what the next call starts from)"
)


#: why the state a call starts from is None on a fresh prompt (``EProperty.none_when_fresh``): such a call keeps no
#: state to start from and runs from zeros
FRESH = (
    "a call that starts from no cache has no state to start from (it runs from zeros), so it serves None; read it on "
    "a call that continues a cache (a decode step of model.generate, or model.trace(prompt, cache=...))"
)
