"""The recurrences the kit knows, stated once from the papers' equations: how a token writes into a mixer's state, and
how its output reads the state.

A recurrent mixer names its rule in ``RULE``; the kit's state identities recompute each token's state and output
from the values the family serves (its queries, keys, values, decays and betas, laid out as the shared vocabulary
lays them out) and compare. Every tensor here is one token's, the sequence axis taken out, in float32:

- ``"selective_scan"`` (Mamba-1): state ``[batch, channels, state_dim]``, queries and keys ``[batch, 1, state_dim]``,
  values and betas ``[batch, channels]``, decays ``[batch, channels, state_dim]``.
- ``"ssd"`` (Mamba-2): state ``[batch, heads, state_dim, head_dim]``, queries and keys ``[batch, groups, state_dim]``,
  values ``[batch, heads, head_dim]``, decays and betas ``[batch, heads]``.
- ``"rg_lru"`` (RecurrentGemma's RG-LRU): state, values (the gated, normalized input) and decays ``[batch, channels]``;
  no keys, queries or betas; the state resets where a sequence starts (``resets``: decays -inf there).
- ``"lightning"`` (MiniMax's lightning attention): state ``[batch, heads, key_dim, value_dim]``, queries and keys
  ``[batch, heads, key_dim]``, values ``[batch, heads, value_dim]``, decays ``[batch, heads]``; no betas.
- ``"gated_delta"`` (DeltaNet, Kimi delta attention): state ``[batch, heads, key_dim, value_dim]``, queries and keys
  ``[batch, key_heads, key_dim]``, values ``[batch, heads, value_dim]``, betas ``[batch, heads]``, decays
  ``[batch, heads]`` (one per head) or ``[batch, heads, key_dim]`` (one per key channel).
- ``"short_conv"`` (LFM2's gated short convolution): state the window ``[batch, kernel_size, channels]``, oldest
  first; queries (C), keys (B) and values (x) ``[batch, channels]``; no decays or betas.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class Recurrence:
    """One rule: ``step(mixer, state, keys, values, decays, betas)`` is the state after a token,
    ``read(mixer, state, queries, values)`` that token's head output."""

    step: Callable[..., Tensor]
    read: Callable[..., Tensor]
    #: each half in one line, for a failure's message
    writes: str
    reads: str
    #: whether the state decays (``decays``); where it does not, ``step`` is given None for them
    decays: bool = True
    #: whether a token's write has a strength (``betas``); where it has none, ``step`` is given None for it
    betas: bool = True
    #: whether a token writes through a key and its output reads through a query; where not (RG-LRU's diagonal
    #: recurrence, whose output is its state), ``step`` and ``read`` are given None for them
    keys: bool = True
    queries: bool = True
    #: whether a sequence's first token keeps nothing of the state before it (Griffin's reset at a document boundary:
    #: its decays there are -inf), so on a prompt alone the first state is the rule applied to any state before, not
    #: only to zeros; where not, a fresh prompt starts from zeros
    resets: bool = False


def _per_head(shared: Tensor, heads: int) -> Tensor:
    """``[batch, groups, dim]`` to ``[batch, heads, dim]``: each group's row serves its consecutive heads."""
    return shared.repeat_interleave(heads // shared.shape[1], dim=1)


def _skip(mixer: Any, values: Tensor) -> Tensor:
    weights = mixer.skip_weights
    if weights is None:
        return torch.zeros_like(values)
    return values * weights.float().view(-1, *[1] * (values.dim() - 2))


def _scan_step(mixer: Any, state: Tensor, keys: Tensor, values: Tensor, decays: Tensor, betas: Tensor) -> Tensor:
    # h = exp(dt * A) * h + dt * B x, per channel
    return decays.exp() * state + betas[..., None] * keys * values[..., None]


def _scan_read(mixer: Any, state: Tensor, queries: Tensor, values: Tensor) -> Tensor:
    # y = C . h + D * x
    return (state * queries).sum(-1) + _skip(mixer, values)


def _ssd_step(mixer: Any, state: Tensor, keys: Tensor, values: Tensor, decays: Tensor, betas: Tensor) -> Tensor:
    keys = _per_head(keys, state.shape[1])
    return decays.exp()[..., None, None] * state + betas[..., None, None] * keys[..., :, None] * values[..., None, :]


def _ssd_read(mixer: Any, state: Tensor, queries: Tensor, values: Tensor) -> Tensor:
    queries = _per_head(queries, state.shape[1])
    return (queries[..., :, None] * state).sum(-2) + _skip(mixer, values)


def _l2(x: Tensor) -> Tensor:
    # the kernels' (and FLA's) L2 norm, eps inside the root
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _delta_keys(mixer: Any, keys: Tensor, heads: int) -> Tensor:
    keys = _per_head(keys, heads)
    return _l2(keys) if mixer.QK_L2_NORM else keys


def _delta_step(mixer: Any, state: Tensor, keys: Tensor, values: Tensor, decays: Tensor, betas: Tensor) -> Tensor:
    # S = exp(g) S; S += k (beta (v - k^T S))
    keys = _delta_keys(mixer, keys, state.shape[1])
    kept = decays.exp()[..., None, None] if decays.dim() == 2 else decays.exp()[..., None]
    state = state * kept
    remembered = (state * keys[..., None]).sum(-2)
    return state + keys[..., None] * (betas[..., None] * (values - remembered))[..., None, :]


def _delta_read(mixer: Any, state: Tensor, queries: Tensor, values: Tensor) -> Tensor:
    # o = (q / sqrt(key_dim)) S
    queries = _delta_keys(mixer, queries, state.shape[1]) * queries.shape[-1] ** -0.5
    return (state * queries[..., None]).sum(-2)


def _lightning_step(mixer: Any, state: Tensor, keys: Tensor, values: Tensor, decays: Tensor, betas: None) -> Tensor:
    # S = exp(g) S + k^T v: every token writes its whole outer product
    return decays.exp()[..., None, None] * state + keys[..., :, None] * values[..., None, :]


def _lightning_read(mixer: Any, state: Tensor, queries: Tensor, values: Tensor) -> Tensor:
    # o = q S, the state after the token's own write; no norm, no scale
    return (queries[..., :, None] * state).sum(-2)


def _window_step(mixer: Any, state: Tensor, keys: Tensor, values: Tensor, decays: Any, betas: Any) -> Tensor:
    # the window shifts by one token: its oldest input drops out, B * x comes in
    return torch.cat([state[:, 1:], (keys * values)[:, None]], dim=1)


def _window_read(mixer: Any, state: Tensor, queries: Tensor, values: Tensor) -> Tensor:
    # y = C * (w . window + bias): the depthwise conv of the window, gated by C
    convolved = (state * mixer.conv_weights.float().transpose(0, 1)).sum(1)
    bias = mixer.conv_bias
    return queries * (convolved if bias is None else convolved + bias.float())


def _lru_step(mixer: Any, state: Tensor, keys: None, values: Tensor, decays: Tensor, betas: None) -> Tensor:
    # h = a * h + x, per channel: x already gated and normalized, a = exp(decays)
    return decays.exp() * state + values


def _lru_read(mixer: Any, state: Tensor, queries: None, values: Tensor) -> Tensor:
    # y = h: the recurrence's output is its state
    return state


RECURRENCES: dict[str, Recurrence] = {
    "selective_scan": Recurrence(_scan_step, _scan_read, "h = exp(decays) * h + betas * B x", "y = C . h + D * x"),
    "ssd": Recurrence(_ssd_step, _ssd_read, "h = exp(decays) * h + betas * B x^T", "y = C h + D * x"),
    "gated_delta": Recurrence(
        _delta_step, _delta_read, "S = exp(decays) S + k betas (v - k^T exp(decays) S)", "o = q S / sqrt(key_dim)"
    ),
    "rg_lru": Recurrence(
        _lru_step, _lru_read, "h = exp(decays) * h + x", "y = h", betas=False, keys=False, queries=False, resets=True
    ),
    "lightning": Recurrence(_lightning_step, _lightning_read, "S = exp(decays) S + k^T v", "o = q S", betas=False),
    "short_conv": Recurrence(
        _window_step,
        _window_read,
        "window = [window[1:], B * x]",
        "y = C * (conv_weights . window + conv_bias)",
        decays=False,
        betas=False,
    ),
}


def recurrence(mixer: Any) -> Recurrence | None:
    """The rule ``mixer`` declares (its component's ``RULE``), or None where it declares none the kit knows."""
    return RECURRENCES.get(getattr(type(mixer), "RULE", None) or "")
