"""Tensor parallelism under torchrun (2 ranks, gloo on the CPU): the kit's checks on the sharded model, and every value equal to one process's.

One launch runs the four families the issue names (the default family, a
sandwich, a mixture, a recurrent hybrid); each test reads its family's record.
"""

import json
import subprocess
import sys

import pytest

from nnterp_conformance import cli
from nnterp_conformance.checkpoints import tiny_checkpoint

FAMILIES = ["llama", "gemma2", "mixtral", "qwen3_next"]

pytestmark = pytest.mark.xdist_group("tensor_parallel")

#: the values the issue asks to read whole, by family: each must be among the compared rows of layer 0 or the last layer
EXPECTED = {
    "llama": ["layer_output", "self_attn.attention_output", "mlp.mlp_output", "self_attn.attention_queries", "self_attn.attention_keys",
              "self_attn.attention_values", "self_attn.attention_scores", "self_attn.attention_probabilities",
              "self_attn.attention_head_outputs", "mlp.mlp_activation", "mlp.mlp_neurons"],
    "mixtral": ["mlp.router_logits", "mlp.expert_weights", "mlp.expert_indices", "mlp.expert_outputs", "mlp.routed_output"],
}
EXPECTED["gemma2"] = EXPECTED["llama"]
EXPECTED["qwen3_next"] = ["linear_attn.attention_queries", "linear_attn.attention_head_outputs", "mlp.expert_outputs"]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    for name in FAMILIES:
        tiny_checkpoint(name)  # written once here, not raced by the ranks
    out = tmp_path_factory.mktemp("tp") / "records.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "nnterp_conformance.tensor_parallel", *FAMILIES, "--json", str(out)]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert out.exists(), finished.stdout[-4000:] + finished.stderr[-4000:]
    return json.loads(out.read_text()), finished


@pytest.mark.parametrize("name", FAMILIES)
def test_every_check_passes_sharded(records, name):
    record = records[0][name]
    failed = {check: found["detail"] for check, found in record["checks"].items() if found["status"] == "fail"}
    assert not failed
    assert record["checks"]["written_pattern_moves_logits"]["status"] == "pass"


@pytest.mark.parametrize("name", FAMILIES)
def test_every_value_equals_one_process(records, name):
    rows = records[0][name]["agreement"]
    differing = {what: problem for what, problem in rows.items() if problem is not None}
    assert not differing
    compared = {what.split("].", 1)[1] for what in rows if what.startswith("layers[")}
    assert set(EXPECTED[name]) <= compared, set(EXPECTED[name]) - compared


@pytest.mark.parametrize("name", FAMILIES)
def test_writes_on_every_rank_move_the_logits_as_on_one_process(records, name):
    rows = records[0][name]["agreement"]
    edits = [what for what in rows if what.startswith("logits after")]
    assert any("attention_probabilities" in what for what in edits) and any("attention_queries" in what for what in edits)
    if name in ("mixtral", "qwen3_next"):
        assert any("expert_outputs" in what for what in edits)
    # each edit agrees with one process and changes the sharded logits
    assert all(rows[what] is None for what in edits)
    assert sum(what.endswith("moves the sharded logits") for what in edits) == len(edits) // 2


def test_the_toolkit_works_sharded(records):
    for name in FAMILIES:
        rows = records[0][name]["agreement"]
        for what in ("logit_lens", "project_on_vocab(layers[0].layer_output)", "cache_values layers.*.layer_output", "cache_values logits"):
            assert rows[what] is None, (name, what)


def test_the_launch_exits_zero_and_rank_zero_reports(records):
    finished = records[1]
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.count(" failed") == len(FAMILIES) and "sharded over 2 ranks" in finished.stdout


def test_the_command_launches_torchrun_and_fails_on_a_failing_check(monkeypatch):
    launched = []
    monkeypatch.setattr(subprocess, "call", lambda command: launched.append(command) or 1)
    assert cli.main(["check", "llama", "--tensor-parallel", "2", "--only", "contribution"]) == 1
    command = launched[0]
    assert command[command.index("--nproc-per-node") + 1] == "2"
    assert command[-4:] == ["nnterp_conformance.tensor_parallel", "llama", "--only", "contribution"]
