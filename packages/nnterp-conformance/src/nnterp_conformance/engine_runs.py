"""What the kit reads off a model on an engine and under transformers, written the same way for both.

The same standard names on either class (``StandardizedTransformer``,
``nnterp.vllm.StandardizedVLLM``): every value a family serves, on every block,
on a prompt and on ``DECODE_STEPS`` decode steps, with the logits of each step;
and the prompt's logits under each edit of ``EDITS``. A run on vLLM is one
trace with one invoke per prompt (a batch of requests of different lengths);
a run under transformers is one ``generate`` per prompt, so its values are that
prompt's alone, as vLLM's are. Both come out flat over one prompt's tokens,
``[tokens, ...]``: what ``checks.flat`` compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

#: two prompts of different lengths: on vLLM one step holds both requests' tokens
PROMPTS = ("The quick brown fox jumps over the lazy dog", "Hello world")
#: decode steps after the prompt's
DECODE_STEPS = 3
#: block values in forward order (one trace reads them in this order), by dotted name from the block
ORDER = (
    "layer_input",
    "attention_norm_output",
    "self_attn.attention_output",
    "layer_mid",
    "mlp_norm_output",
    "mlp_input",
    "mlp.router_logits",
    "mlp.mlp_neurons",
    "mlp.mlp_output",
    "mlp.mixture_output",
    "layer_output",
)


def _value(block: Any, name: str) -> Any:
    host, _, value = name.rpartition(".")
    return getattr(getattr(block, host) if host else block, value)


def served(model: Any, engine: Any = None) -> list[str]:
    """The names of ``ORDER`` that every block of ``model`` serves (and ``engine``'s, where given: what both serve)."""
    names = []
    for name in ORDER:
        reasons = [block_reason(block, name) for block in model.layers]
        if engine is not None:
            reasons += [block_reason(block, name) for block in engine.layers]
        if all(reason is None for reason in reasons):
            names.append(name)
    return names


def block_reason(block: Any, name: str) -> str | None:
    """Why a block does not serve ``name`` (a dotted name from the block), or None where it does."""
    host, _, value = name.rpartition(".")
    owner = block.__dict__.get(host) if host else block
    if owner is None:
        return f"no {host} module"
    declared = type(owner).values().get(value) if hasattr(type(owner), "values") else None
    return f"{type(owner).__name__} declares no {value}" if declared is None else declared.reason(owner)


def _edit_stream(model: Any) -> None:
    """The stream: ``layer_output`` of block 1 halved, by assignment."""
    model.layers[1].layer_output = model.layers[1].layer_output * 0.5


def _edit_stream_in_place(model: Any) -> None:
    """The stream entering the last block, doubled in place."""
    model.layers[-1].layer_input[:] *= 2


def _edit_contribution(model: Any) -> None:
    """A contribution: block 0's attention output zeroed in place."""
    model.layers[0].self_attn.attention_output[:] = 0


def _edit_neurons(model: Any) -> None:
    """The neurons: block 1's first eight zeroed in place."""
    model.layers[1].mlp.mlp_neurons[..., :8] = 0


def _edit_routing(model: Any) -> None:
    """The routing: block 1's router logits for expert 0 pushed down, by assignment."""
    logits = model.layers[1].mlp.router_logits
    model.layers[1].mlp.router_logits = logits - 10 * torch.nn.functional.one_hot(
        torch.zeros_like(logits[..., 0]).long(), logits.shape[-1]
    )


#: edit name -> (the block value it needs served, the edit written in standard names)
EDITS: dict[str, tuple[str, Callable[[Any], None]]] = {
    "stream": ("layer_output", _edit_stream),
    "stream_in_place": ("layer_input", _edit_stream_in_place),
    "contribution": ("self_attn.attention_output", _edit_contribution),
    "neurons": ("mlp.mlp_neurons", _edit_neurons),
    "routing": ("mlp.router_logits", _edit_routing),
}


def edits_for(names: list[str]) -> list[str]:
    """The edits whose value is among ``names``."""
    return [edit for edit, (needs, _) in EDITS.items() if needs in names]


def _step(model: Any, names: list[str]) -> dict[str, Any]:
    """Every value of ``names`` on every block, and the step's logits, as copies (vLLM reuses its buffers)."""
    step = {}
    for index, block in enumerate(model.layers):
        for name in names:
            step[f"{index}.{name}"] = _value(block, name).clone()
    step["logits"] = model.logits.clone()
    return step


def _steps_on_vllm(model: Any, names: list[str]) -> list[list[dict[str, Any]]]:
    """``_step`` on the prompt and every decode step, for each prompt: one invoke (one vLLM request) per prompt."""
    import nnsight

    first, second = PROMPTS
    # each invoke saves its own name: a name two invokes save comes back as one of them
    with model.trace(temperature=0.0, max_tokens=DECODE_STEPS + 1) as tracer:
        with tracer.invoke(first):
            got_first = nnsight.save([])
            for _ in tracer.iter[:]:
                got_first.append(_step(model, names))
        with tracer.invoke(second):
            got_second = nnsight.save([])
            for _ in tracer.iter[:]:
                got_second.append(_step(model, names))
    return [got_first, got_second]


def on_vllm(model: Any, names: list[str]) -> dict[str, Any]:
    """The run of a ``StandardizedVLLM``: ``{"values": [prompt][step]{block.name: tensor}, "logits": [prompt][step], "edits": {edit: [prompt logits]}}``."""
    from nnterp.errors import OutOfOrder

    first, second = PROMPTS
    try:
        runs = _steps_on_vllm(model, names)
    except OutOfOrder:
        # a family reading a value where the forward has passed it already (a mutant): one run per value
        runs = _steps_on_vllm(model, [])
        for name in names:
            for run, alone in zip(runs, _steps_on_vllm(model, [name])):
                for step, more in zip(run, alone):
                    step.update({key: value for key, value in more.items() if key != "logits"})
    values = [[{key: value for key, value in step.items() if key != "logits"} for step in run] for run in runs]
    logits = [[step["logits"].reshape(-1) for step in run] for run in runs]
    edits = {}
    for edit in edits_for(names):
        apply = EDITS[edit][1]
        with model.trace(temperature=0.0, max_tokens=1) as tracer:
            with tracer.invoke(first):
                apply(model)
                edited_first = model.logits.clone().save()
            with tracer.invoke(second):
                apply(model)
                edited_second = model.logits.clone().save()
        edited = [edited_first, edited_second]
        edits[edit] = [row.reshape(-1) for row in edited]
    return {"names": names, "values": values, "logits": logits, "edits": edits}


def on_transformers(model: Any, names: list[str]) -> dict[str, Any]:
    """The same run under ``StandardizedTransformer``, one prompt at a time, greedy, every value flattened to one prompt's tokens."""
    import nnsight

    steps = DECODE_STEPS + 1
    values, logits = [], []
    for prompt in PROMPTS:
        with model.generate(prompt, max_new_tokens=steps, do_sample=False) as tracer:
            got = nnsight.save([])
            for _ in tracer.iter[:]:
                step = {}
                for index, block in enumerate(model.layers):
                    for name in names:
                        step[f"{index}.{name}"] = _value(block, name)[0].detach().clone()
                step["logits"] = model.logits[0, -1].detach().clone()
                got.append(step)
        values.append([{key: value for key, value in step.items() if key != "logits"} for step in got])
        logits.append([step["logits"] for step in got])
    edits = {}
    for edit in edits_for(names):
        apply = EDITS[edit][1]
        edited = []
        for prompt in PROMPTS:
            with model.trace(prompt):
                apply(model)
                row = model.logits[0, -1].detach().clone().save()
            edited.append(row)
        edits[edit] = edited
    return {"names": names, "values": values, "logits": logits, "edits": edits}


def _read_pattern(model: Any) -> None:
    model.layers[0].self_attn.attention_probabilities.save()


def _write_short_stream(model: Any) -> None:
    model.layers[0].layer_output = model.layers[0].layer_output[:1]


#: mistakes a user makes on an engine, each refused by nnterp's own error: name -> (the error's class name, the mistake)
REFUSALS: dict[str, tuple[str, Callable[[Any], None]]] = {
    "unavailable_value": ("Unavailable", _read_pattern),
    "short_write": ("WriteMismatch", _write_short_stream),
}


def refusals_on_vllm(model: Any) -> dict[str, tuple[str, str]]:
    """Each mistake of ``REFUSALS`` in a trace of its own: what the client raised (class name, message)."""
    found = {}
    for name, (_, mistake) in REFUSALS.items():
        try:
            with model.trace(PROMPTS[0], temperature=0.0, max_tokens=1):
                mistake(model)
        except Exception as error:  # noqa: BLE001 - what was raised is the result
            found[name] = (type(error).__name__, str(error))
        else:
            found[name] = ("nothing", "the trace ran")
    return found
