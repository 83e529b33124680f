"""What a client of the local NDIF stack (``scripts/ndif_stack.py``) runs, locally and on the server, to compare the two.

Imported by ``tests/test_ndif_server.py`` (this workspace's Python 3.11) and run as a script by another Python with
nnterp installed (the stack's own Python 3.12 environment)::

    .ndif/server/bin/python tests/ndif_client.py llama gemma2

which prints, as JSON, the client's Python and what differed for each family (nothing, where all is equal). It needs
no pytest: every comparison is ``torch.equal``, float32 on both sides, with the server's torch thread count (CPU
reductions sum in another order on another count of threads, which moves a gradient's last bit).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nnsight
import nnterp  # noqa: F401  (before any transformers.models module)
import torch
from nnterp import StandardizedTransformer
from nnterp.toolkit import cache_values
from nnterp_conformance import tiny_checkpoint

HOME = Path(os.environ.get("NNTERP_NDIF_HOME", Path(__file__).resolve().parents[1] / ".ndif"))
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
#: a dense pre-norm, a sandwich, a mixture of experts, a recurrent hybrid
FAMILIES = ["llama", "gemma2", "mixtral", "falcon_h1"]
STEPS = 3


def stack(name: str = "server") -> dict | None:
    """The running stack's record (``api``, ``python``, ``threads``, ``logs``...), None where none is running."""
    path = HOME / name / "stack.json"
    return json.loads(path.read_text()) if path.exists() else None


START = "uv run python scripts/ndif_stack.py build && uv run python scripts/ndif_stack.py start"
#: what a process that died of a crash leaves in Ray's logs and the stack's own
CRASH = re.compile(r"Segmentation fault|SIGSEGV|Fatal Python error|core dumped|SIGABRT|SIGBUS")


def api_or_skip() -> str:
    """The stack's URL; in a pytest run without a stack, a skip naming the command, or under CI (``CI`` set) a failure."""
    import pytest

    record = stack()
    if record is None:
        if os.environ.get("CI"):
            pytest.fail(f"no NDIF stack is running ({HOME / 'server' / 'stack.json'} is missing); .ci/run starts one with `{START}`")
        pytest.skip(f"no NDIF stack is running; start one with `{START}`")
    return record["api"]


@contextlib.contextmanager
def server_threads() -> Iterator[None]:
    """This process on the server's torch thread count for the block, its own after."""
    before = torch.get_num_threads()
    torch.set_num_threads(stack()["threads"])
    try:
        yield
    finally:
        torch.set_num_threads(before)


def crashes(record: dict) -> list[str]:
    """Each line of the stack's logs and Ray's (every process, the model actors' included) that says a process crashed."""
    folders = [Path(record["logs"]), Path(record["ray_temp"]) / "session_latest" / "logs"]
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.exists() else ():
            if path.is_file() and path.suffix in (".log", ".err", ".out", ""):
                for line in path.read_text(errors="replace").splitlines():
                    if CRASH.search(line):
                        found.append(f"{path}: {line.strip()[:200]}")
    return found


def deployed(record: dict) -> list[str]:
    """The model keys the stack has deployed (its ``GET /status``)."""
    with urllib.request.urlopen(f"{record['api']}/status", timeout=60) as response:
        return list(json.loads(response.read()).get("deployments", {}))


def served(name: str, **kwargs) -> StandardizedTransformer:
    """The tiny checkpoint of ``name``, float32: the stack, on this machine, loads it by its directory."""
    return StandardizedTransformer(tiny_checkpoint(name), dtype=torch.float32, **kwargs)


def reads(model: StandardizedTransformer, remote, edit: bool) -> list[torch.Tensor]:
    """Block 0's input, block 1's attention and MLP outputs and its output, the last block's output and the logits.

    With ``edit``, block 1's MLP output is halved (an assignment) and its output's last position zeroed (in place).
    Each value is saved by a name of its own: a remote trace hands back the names bound to saved values.
    """
    with torch.no_grad(), model.trace(PROMPTS, remote=remote):
        entering = model.layers[0].layer_input.save()
        block = model.layers[1]
        attention = block.self_attn.attention_output.save()
        if edit:
            block.mlp.mlp_output = block.mlp.mlp_output * 0.5
        mlp = block.mlp.mlp_output.save()
        if edit:
            model.layers[1].layer_output[:, -1] = 0.0
        output = block.layer_output.save()
        last = model.layers[-1].layer_output.save()
        logits = model.logits.save()
    return [entering, attention, mlp, output, last, logits]


def gradients(model: StandardizedTransformer, remote) -> list[torch.Tensor]:
    """Gradients of a scalar of the last logits at block 1's output, its attention output and the stream entering block 0.

    The stream is made to require grad first: NDIF's servers freeze the weights, so nothing else would be tracked;
    with trainable weights (a local run) the line changes nothing.
    """
    with model.trace(PROMPTS, remote=remote):
        stream = model.layers[0].layer_input
        stream.requires_grad_(True)
        attention = model.layers[1].self_attn.attention_output
        output = model.layers[1].layer_output
        metric = model.logits[:, -1].logsumexp(-1).sum()
        with metric.backward():  # gradients arrive last value first
            output_grad = output.grad.save()
            attention_grad = attention.grad.save()
            stream_grad = stream.grad.save()
        value = metric.detach().save()
    return [value, output_grad, attention_grad, stream_grad]


def generated(model: StandardizedTransformer, remote) -> list[torch.Tensor]:
    """Greedy generation of ``STEPS`` tokens: at each step of ``tracer.iter`` the last block's output and the logits at the
    last position, then the tokens."""
    with torch.no_grad(), model.generate(PROMPTS[0], max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, remote=remote) as tracer:
        streams, logits = nnsight.save([]), nnsight.save([])
        for _ in tracer.iter[:STEPS]:
            streams.append(model.layers[-1].layer_output[:, -1].clone())
            logits.append(model.logits[:, -1].clone())
        tokens = tracer.result.save()
    if len(streams) != STEPS or tokens.shape[-1] < STEPS:
        raise AssertionError(f"the generation ran {len(streams)} steps of tracer.iter, not {STEPS}")
    return [*streams, *logits, tokens]


def every_value(model: StandardizedTransformer, remote) -> list[torch.Tensor]:
    """Every standard value the checkpoint serves (``cache_values``' ``"*"``), in forward order."""
    cache = cache_values(model, PROMPTS, "*", progress=False, remote=remote)
    if len(cache) < 20:
        raise AssertionError(f"cache_values('*') read only {list(cache)}")
    return [cache[name] for name in cache]


CHECKS = {
    "reads": lambda model, remote: reads(model, remote, edit=False),
    "writes": lambda model, remote: reads(model, remote, edit=True),
    "gradients": gradients,
    "generation": generated,
    "every value": every_value,
}
#: how a check loads its model beyond float32: eager attention serves the attention's interior (the server switches
#: to it for the request, as nnsight sends the implementation along)
LOADS = {"every value": {"attn_implementation": "eager"}}


def differences(local: list[torch.Tensor], remote: list[torch.Tensor]) -> list[str]:
    """Each value of ``remote`` that is not exactly its ``local`` counterpart, by index, with its shapes or largest gap."""
    if len(local) != len(remote):
        return [f"{len(remote)} values came back, {len(local)} were read locally"]
    found = []
    for index, (here, there) in enumerate(zip(local, remote)):
        if here.shape != there.shape:
            found.append(f"value {index}: shape {tuple(there.shape)}, locally {tuple(here.shape)}")
        elif not torch.equal(here, there):
            found.append(f"value {index}: differs by up to {(here.double() - there.double()).abs().max().item():.3g}")
    return found


def compare(name: str, check: str, api: str) -> list[str]:
    """What differs between the local and the remote run of ``check`` on ``name``'s tiny checkpoint."""
    model = served(name, **LOADS.get(check, {}))
    return differences(CHECKS[check](model, False), CHECKS[check](model, api))


def main(families: list[str]) -> None:
    record = stack()
    if record is None:
        sys.exit(f"no NDIF stack is running under {HOME}")
    torch.set_num_threads(record["threads"])
    report = {"python": sys.version.split()[0], "differences": {}}
    for name in families or FAMILIES:
        report["differences"][name] = {check: compare(name, check, record["api"]) for check in CHECKS}
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
