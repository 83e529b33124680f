"""Standard values on a real NDIF server (``scripts/ndif_stack.py``) equal a local run bit for bit, from this Python 3.11.

The stack runs NDIF's own API, queue, controller and model actor on 127.0.0.1, Python 3.12, float32; each family's tiny
checkpoint is deployed on its first request. Elsewhere than CI these tests skip when no stack is running; under CI
(``CI`` set) a missing stack fails them, since ``.ci/run`` starts one.
"""

import json
import os
from pathlib import Path

import pytest
import torch
from nnsight.modeling import huggingface
from nnterp import StandardizedTransformer
from nnterp_conformance import tiny_checkpoint

STACK = Path(os.environ.get("NNTERP_NDIF_HOME", Path(__file__).resolve().parents[1] / ".ndif")) / "server" / "stack.json"
START = "uv run python scripts/ndif_stack.py build && uv run python scripts/ndif_stack.py start"
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
#: a dense pre-norm, a sandwich, a mixture of experts, a recurrent hybrid
FAMILIES = ["llama", "gemma2", "mixtral", "falcon_h1"]

pytestmark = pytest.mark.xdist_group("ndif_server")


@pytest.fixture(scope="module")
def api() -> str:
    if not STACK.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no NDIF stack is running ({STACK} is missing); .ci/run starts one with `{START}`")
        pytest.skip(f"no NDIF stack is running; start one with `{START}`")
    return json.loads(STACK.read_text())["api"]


def served(name: str) -> StandardizedTransformer:
    path = str(tiny_checkpoint(name))
    # nnsight asks the hub for a repo id's canonical spelling when it builds the request's key; a local checkpoint is its own
    huggingface._ID_CACHE[path] = path
    return StandardizedTransformer(path, dtype=torch.float32)


def run(model: StandardizedTransformer, remote, edit: bool) -> list[torch.Tensor]:
    # each value saved by name: a remote trace hands back the names bound to saved values
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


@pytest.mark.parametrize("name", FAMILIES)
def test_reads_and_writes_on_the_server_equal_a_local_run(api, name):
    model = served(name)
    for edit in (False, True):
        local, remote = run(model, False, edit), run(model, api, edit)
        assert [tuple(value.shape) for value in remote] == [tuple(value.shape) for value in local]
        unequal = [index for index, (here, there) in enumerate(zip(local, remote)) if not torch.equal(here, there)]
        assert not unequal, f"{name} (edit={edit}): values {unequal} differ from the local run"
    # the writes took effect on the server: its edited logits are not its plain ones
    assert not torch.equal(run(model, api, False)[-1], run(model, api, True)[-1])
