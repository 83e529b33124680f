"""How a user spells an envoy and its values: ``layers[1].self_attn.attention_probabilities``, not a native path.

Errors name what the user wrote. nnsight's locations are native module paths
(``model.model.layers.1.self_attn.source.attention_interface_1...``); the
spelling here walks the same envoy from the root through the standard names a
family's ``rename`` binds, so a message reads in the vocabulary of the trace
that raised it.
"""

from __future__ import annotations

from typing import Any


def spelled(envoy: Any, value: str | None = None) -> str:
    """``envoy`` (and ``value`` on it) as the user reaches it from the model: ``layers[0].mlp.mlp_output``.

    At each step from the root, the name that jumps furthest down toward
    ``envoy`` wins (``layers`` on the root, over its native ``model.layers``),
    and a standard alias beats the native name at the same depth; a block list's
    children are indexed (``[3]``). The root alone spells as ``model``.
    """
    chain = _ancestors(envoy)
    parts: list[str] = []
    node = chain[0]
    depth = 0
    while node is not envoy:
        name, depth = _step(node, chain, depth)
        parts.append(f"[{name}]" if name.isdigit() else f".{name}" if parts else name)
        node = chain[depth]
    text = "".join(parts) or "model"
    if value is None:
        return text
    return value if text == "model" else f"{text}.{value}"


def _ancestors(envoy: Any) -> list[Any]:
    chain = [envoy]
    while (parent := chain[-1].parent) is not None:
        chain.append(parent)
    return chain[::-1]


def _step(node: Any, chain: list[Any], depth: int) -> tuple[str, int]:
    """The attribute of ``node`` that reaches deepest along ``chain``, and the depth it reaches."""
    native = chain[depth + 1].path.rsplit(".", 1)[-1]
    best = (native, depth + 1)
    positions = {id(envoy): index for index, envoy in enumerate(chain)}
    for name, child in vars(node).items():
        index = positions.get(id(child), -1)
        if name.startswith("_") or index <= depth:
            continue
        if index > best[1] or (index == best[1] and best[0] == native and name != native):
            best = (name, index)
    return best


def spelled_cached(envoy: Any, value: str | None = None) -> str:
    """``spelled(envoy, value)``, worked out once per envoy and value (a read tags its tensor with it)."""
    cache = envoy.__dict__.get("_nnterp_spellings")
    if cache is None:
        cache = envoy.__dict__["_nnterp_spellings"] = {}
    text = cache.get(value)
    if text is None:
        text = cache[value] = spelled(envoy, value)
    return text
