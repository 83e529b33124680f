"""The upgrade radar: the parsing of a moved operation, the comparison of two releases' records, and the command end to end."""

import json
import subprocess

import pytest

from nnterp.errors import SourceNotAvailable
from nnterp_conformance import cli
from nnterp_conformance.upgrade import (
    MOVED_VALUE,
    NEWLY_FAILING,
    NO_LONGER_LOADS,
    NOT_IN_BASELINE,
    PASSES,
    STILL_FAILING,
    compare,
    new_types,
    parse_moved,
    render,
    scratch_python,
)

FAMILY = "nnterp_text.families.gpt2"


def moved_message() -> str:
    """A check's detail for a value whose operation is gone, as ``verdict`` writes it (the exception's type, then its message)."""
    error = SourceNotAvailable(
        "GPT2Attention.attention_scores", "self_attn.source.torch_matmul_0.output", "torch_matmul_0", ("query_0", "key_0", "eager_attention_forward_0")
    )
    return f"{type(error).__name__}: {error}"


def entry(checkpoint, checks, details=None, family=FAMILY, reason=None):
    found = {"checkpoint": checkpoint, "model_type": checkpoint, "family": family, "checks": checks, "details": details or {}}
    found["status"] = "fail" if "fail" in checks.values() or reason else "pass"
    if reason:
        found["reason"] = reason
    return found


def test_a_source_not_available_message_parses_into_the_value_the_pin_and_what_is_there_now():
    moved = parse_moved(moved_message())
    assert moved == {
        "value": "GPT2Attention.attention_scores",
        "path": "self_attn.source.torch_matmul_0.output",
        "operation": "torch_matmul_0",
        "available": ["query_0", "key_0", "eager_attention_forward_0"],
    }


def test_a_forward_with_no_operations_left_parses_to_an_empty_list_and_other_failures_do_not_parse():
    empty = str(SourceNotAvailable("LlamaAttention.attention_probabilities", "self_attn.source.softmax_0.output", "softmax_0", ()))
    assert parse_moved(f"layers[1]: {empty}")["available"] == []
    assert parse_moved("layers[0]: attention_output + mlp_output != layer_output: off by 0.3") is None


def test_a_check_that_passed_and_now_fails_is_newly_failing_and_a_gone_operation_is_moved():
    baseline = {
        "gpt2": entry("gpt2", {"contribution": "pass", "pattern_is_softmax_of_scores": "pass", "available_values_resolve": "pass"}),
        "gpt2-reorder": entry("gpt2-reorder", {"contribution": "pass"}),
        "gpt2-old": entry("gpt2-old", {"contribution": "fail"}),
        "gpt2-gone": entry("gpt2-gone", {"contribution": "pass"}),
    }
    new = {
        "gpt2": entry(
            "gpt2",
            {"contribution": "fail", "pattern_is_softmax_of_scores": "fail", "available_values_resolve": "fail"},
            {
                "contribution": "layers[0]: layer_input + attention_output + mlp_output != layer_output: off by 0.5",
                "pattern_is_softmax_of_scores": moved_message(),
                "available_values_resolve": f"layers[0].self_attn.attention_scores: {moved_message()}",
            },
        ),
        "gpt2-reorder": entry("gpt2-reorder", {"contribution": "pass"}),
        "gpt2-old": entry("gpt2-old", {"contribution": "fail"}, {"contribution": "off by 1"}),
        "gpt2-gone": entry(
            "gpt2-gone",
            {},
            {"raised at": [
                "/work/packages/nnterp-text/src/nnterp_text/families/gpt2.py:5 in config",
                "/tmp/nnterp-upgrade-9.9.9-x/lib/python3.12/site-packages/transformers/models/gpt2/configuration_gpt2.py:10 in __init__",
            ]},
            reason="raises TypeError: GPT2Config.__init__() got an unexpected keyword argument 'n_inner'",
        ),
        "gpt2-new": entry("gpt2-new", {"contribution": "fail"}, {"contribution": "off by 2"}),
    }
    rows = compare(baseline, new)[FAMILY]
    kinds = {(row["checkpoint"], row["kind"]) for row in rows}
    assert kinds == {
        ("gpt2", NEWLY_FAILING),
        ("gpt2", MOVED_VALUE),
        ("gpt2-reorder", PASSES),
        ("gpt2-old", STILL_FAILING),
        ("gpt2-gone", NO_LONGER_LOADS),
        ("gpt2-new", NOT_IN_BASELINE),
    }
    (newly,) = [row for row in rows if row["kind"] == NEWLY_FAILING]
    assert newly["check"] == "contribution" and "off by 0.5" in newly["detail"]
    # one row per moved value, naming every check it broke
    (moved,) = [row for row in rows if row["kind"] == MOVED_VALUE]
    assert moved["operation"] == "torch_matmul_0" and moved["checks"] == ["pattern_is_softmax_of_scores", "available_values_resolve"]
    (gone,) = [row for row in rows if row["kind"] == NO_LONGER_LOADS]
    assert "n_inner" in gone["detail"]
    assert gone["where"] == ["nnterp_text/families/gpt2.py:5 in config", "transformers/models/gpt2/configuration_gpt2.py:10 in __init__"]

    text = render("9.9.9", "a baseline", {FAMILY: rows}, new_types({"mapping_types": {"causal-LM": ["gpt2", "brand_new"]}, "served": ["gpt2"]}, {"causal-LM": ["gpt2"]}))
    assert f"## `{FAMILY}`" in text
    assert "| gpt2 | moved | `GPT2Attention.attention_scores` is pinned to `self_attn.source.torch_matmul_0.output`" in text
    assert "`eager_attention_forward_0`" in text
    assert "| brand_new | causal-LM |" in text
    assert "| gpt2-reorder | passes | 1/1 checks pass |" in text


def test_a_load_that_raises_source_not_available_is_a_moved_value():
    rows = compare({"gpt2": entry("gpt2", {"contribution": "pass"})}, {"gpt2": entry("gpt2", {}, reason=f"raises {moved_message()}")})
    assert [row["kind"] for row in rows[FAMILY]] == [MOVED_VALUE]


@pytest.mark.slow
@pytest.mark.xdist_group("upgrade")
def test_the_command_builds_the_release_and_reports_each_family(tmp_path, capsys):
    """Against transformers 5.23.0 on gpt2 and llama: a scratch environment with that release, the records of both, a section per family."""
    scratch, out = tmp_path / "env", tmp_path / "report.md"
    arguments = ["upgrade-report", "--transformers", "5.23.0", "--env", str(scratch), "--checkpoint", "gpt2", "--checkpoint", "llama", "--out", str(out)]
    assert cli.main(arguments) == 0
    found = subprocess.run(
        [str(scratch_python(scratch)), "-c", "import importlib.metadata as m; print(m.version('transformers'))"], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "5.23.0"
    records = json.loads((scratch / "records.json").read_text())
    assert records["transformers"] == "5.23.0"
    checked = {one["checkpoint"] for entry in records["records"] for one in [entry, *entry.get("variants", [])] if "checkpoint" in one}
    assert checked == {"gpt2", "llama"}
    # its own checkpoint folder, since checkpoints are keyed by the release
    assert sorted(path.name.split("-")[0] for path in (scratch / "checkpoints").iterdir() if not path.name.startswith(".")) == ["gpt2", "llama"]
    text = out.read_text()
    assert "## `nnterp_text.families.gpt2`" in text and "## `nnterp.families.default`" in text
    assert "| gpt2 |" in text and "| llama |" in text
    assert text in capsys.readouterr().out
