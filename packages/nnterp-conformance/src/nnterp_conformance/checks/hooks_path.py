"""The toolkit's read-only hooks path reads what a trace reads: every value it would serve, bit for bit.

``cache_values`` (and ``extract_values``, ``logit_lens``) read the standard values that sit exactly at a
module boundary off plain forward hooks instead of a trace (``nnterp.toolkit._hooks``), chosen by
``_hooks.boundary``. None of the other checks runs that path: they all trace. This one reads, on the
checkpoint, every value the path qualifies, once through it and once through a trace, and holds the two
to the same tensors.
"""

from __future__ import annotations

from nnterp.protocols import StandardModel

import torch

from .base import Case, CheckFailure, Skip, check


def served_by_the_hooks(model: StandardModel) -> bool:
    """Whether the hooks path can serve this model at all (not a vision wrapper, a family that rewrites its invokes,
    offloaded weights...: ``_hooks.model_reason``); where it cannot, every call traces and there is nothing to compare."""
    from nnterp.toolkit import _hooks as hooks

    return hooks.model_reason(model) is None


def qualifying(model: StandardModel) -> tuple[list[str], dict[str, str]]:
    """The standard names (root values, then ``layers.<i>.<value>``) the hooks path reads on ``model``, and why each
    available value it does not read goes to the trace (``_hooks.boundary``'s sentence), by name."""
    from nnterp.toolkit import _hooks as hooks
    from nnterp.toolkit.cache import _host, _root_values, block_order

    before, after = _root_values(model)
    candidates = [*before, *after]
    for index in range(model.num_layers):
        candidates += [f"layers.{index}.{value}" for value in block_order(model.layers[index])]
    found, refused = [], {}
    for name in candidates:
        host, value = _host(model, name)
        descriptor = getattr(type(host), value, None)
        if descriptor is None or descriptor.reason(host) is not None:
            continue  # unavailable here: no path reads it
        where = hooks.boundary(host, value)
        if isinstance(where, str):
            refused[name] = where
        else:
            found.append(name)
    return found, refused


@check("toolkit", applies=served_by_the_hooks, drawn=False)
def hooks_path_reads_the_traced_values(model: StandardModel, case: Case) -> str:
    """Every value the toolkit's hooks path qualifies is read by cache_values(engine="hooks") as the trace reads it, bit for bit."""
    from nnterp.toolkit import _hooks as hooks
    from nnterp.toolkit import cache_values

    reason = hooks.model_reason(model)
    if reason is not None:
        raise Skip(f"the hooks path serves no call on this model: {reason}")
    if not all(isinstance(prompt, str) for prompt in case.prompts):
        raise Skip("needs text prompts: cache_values tokenizes them")
    names, refused = qualifying(model)
    if not names:
        why = sorted(set(refused.values()))
        raise Skip(
            f"no value of this checkpoint is read at a module boundary ({'; '.join(why[:3]) or 'no value is available'})"
        )
    prompts = list(case.prompts)
    hooked = cache_values(model, prompts, names, batch_size=len(prompts), progress=False, engine="hooks")
    traced = cache_values(model, prompts, names, batch_size=len(prompts), progress=False, engine="nnsight")
    if hooked.engine != "hooks":
        raise CheckFailure(f"engine='hooks' ran {hooked.engine}: {hooked.fallback}")
    if not torch.equal(hooked.input_ids, traced.input_ids) or not torch.equal(
        hooked.attention_mask, traced.attention_mask
    ):
        raise CheckFailure("the hooks path and the trace tokenized the prompts differently")
    for name in names:
        one, other = hooked[name], traced[name]
        if one.dtype != other.dtype or one.shape != other.shape:
            raise CheckFailure(
                f"{name}: the hooks path reads {one.dtype} {tuple(one.shape)}, the trace {other.dtype} {tuple(other.shape)}"
            )
        if not torch.equal(one, other):
            gap = (one.double() - other.double()).abs().max().item() if one.is_floating_point() else float("nan")
            raise CheckFailure(
                f"{name}: the hooks path reads another tensor than the trace (off by {gap:.3g}, max abs)"
            )
    padded = "left-padded" if not bool(traced.attention_mask.all()) else "unpadded"
    return f"{len(names)} values bit for bit on a {padded} batch of {len(prompts)} ({len(refused)} others traced)"
