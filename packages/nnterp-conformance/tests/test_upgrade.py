"""The upgrade radar: the parsing of a moved operation, the findings of two releases' records, their causes and counts,
the packages, the Markdown, the records that keep going per value, and the command end to end."""

import json
from importlib.metadata import version
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest
from transformers.models.gpt2 import modeling_gpt2

from nnterp.errors import SourceNotAvailable
from nnterp_conformance import cli, upgrade
from nnterp_conformance.upgrade import default_out, scratch_python, upgrade_report
from nnterp_conformance.upgrade_findings import (
    IDENTITY,
    MOVED_VALUE,
    NEWLY_FAILING,
    NO_LONGER_LOADS,
    NOT_IN_BASELINE,
    PASSES,
    RAISES_CHECKED,
    STILL_FAILING,
    VALUE_RAISES,
    causes,
    compare,
    new_types,
    package_moves,
    parse_moved,
    pinned,
    tally,
)
from nnterp_conformance.upgrade_render import command_line, render

FAMILY = "nnterp_text.families.gpt2"
RECURRENT = "nnterp_recurrent.families.mamba"
#: the frames of an exception raised in a recurrent family's routing, as ``raised_at`` writes them
ROUTING_FRAMES = [
    "/work/packages/nnterp-core/src/nnterp/transformer.py:120 in __init__",
    "/work/packages/nnterp-recurrent/src/nnterp_recurrent/routing.py:61 in _cell",
]
FUNC = "TypeError: Func() is not a transformers kernel dispatcher (no 'implementation' it calls)"


def moved_message(value: str = "GPT2Attention.attention_scores", operation: str = "torch_matmul_0") -> str:
    """A check's detail for a value whose operation is gone, as ``verdict`` writes it (the exception's type, then its message)."""
    error = SourceNotAvailable(value, f"self_attn.source.{operation}.output", operation, ("query_0", "key_0", "eager_attention_forward_0"))
    return f"{type(error).__name__}: {error}"


def entry(checkpoint, checks, details=None, family=FAMILY, reason=None, **extra):
    found = {"checkpoint": checkpoint, "model_type": checkpoint, "family": family, "checks": checks, "details": details or {}, **extra}
    found["status"] = "fail" if "fail" in checks.values() or reason or extra.get("failing_values") else "pass"
    if reason:
        found["reason"] = reason
    return found


def gone(checkpoint, error=FUNC, stage=None, frames=ROUTING_FRAMES, family=RECURRENT):
    """The record ``report.broken`` writes for a checkpoint that raised, with where (and, from the radar's records, while doing what)."""
    details = {"raised at": frames, **({"raised while": stage} if stage else {})}
    return entry(checkpoint, {}, details, family=family, reason=f"raises {error}")


def test_a_source_not_available_message_parses_into_the_value_the_pin_and_what_is_there_now():
    moved = parse_moved(moved_message())
    assert moved == {
        "value": "GPT2Attention.attention_scores",
        "path": "self_attn.source.torch_matmul_0.output",
        "operation": "torch_matmul_0",
        "available": ["query_0", "key_0", "eager_attention_forward_0"],
    }


def test_a_value_named_with_a_space_parses_whole_behind_what_the_check_says_first():
    error = SourceNotAvailable("StateSpace.chunk states", "source.mamba2_chunk_scan_0.output", "mamba2_chunk_scan_0", ("dtype_0",))
    moved = parse_moved(f"layers[0].linear_attn.states: {type(error).__name__}: {error}")
    assert moved["value"] == "StateSpace.chunk states" and moved["operation"] == "mamba2_chunk_scan_0"


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
            failing_values={"self_attn.attention_scores": {"error": moved_message(), "while": "reading it", "layers": [0, 1], "raised at": []}},
        ),
        "gpt2-reorder": entry("gpt2-reorder", {"contribution": "pass"}),
        "gpt2-old": entry("gpt2-old", {"contribution": "fail"}, {"contribution": "off by 1"}),
        "gpt2-gone": gone(
            "gpt2-gone",
            "TypeError: GPT2Config.__init__() got an unexpected keyword argument 'n_inner'",
            frames=[
                "/work/packages/nnterp-text/src/nnterp_text/families/gpt2.py:5 in config",
                "/tmp/nnterp-upgrade-9.9.9-x/lib/python3.12/site-packages/transformers/models/gpt2/configuration_gpt2.py:10 in __init__",
            ],
            family=FAMILY,
        ),
        "gpt2-new": entry("gpt2-new", {"contribution": "fail"}, {"contribution": "off by 2"}),
    }
    rows = compare(baseline, new)[FAMILY]
    assert {(row["checkpoint"], row["kind"]) for row in rows} == {
        ("gpt2", NEWLY_FAILING),
        ("gpt2", MOVED_VALUE),
        ("gpt2-reorder", PASSES),
        ("gpt2-old", STILL_FAILING),
        ("gpt2-gone", NO_LONGER_LOADS),
        ("gpt2-new", NOT_IN_BASELINE),
    }
    (newly,) = [row for row in rows if row["kind"] == NEWLY_FAILING]
    assert newly["check"] == "contribution" and "off by 0.5" in newly["detail"]
    # one finding per moved value, naming every check it broke and every value whose read raised it
    (moved,) = [row for row in rows if row["kind"] == MOVED_VALUE]
    assert moved["operation"] == "torch_matmul_0" and moved["checks"] == ["pattern_is_softmax_of_scores", "available_values_resolve"]
    assert moved["reads"] == ["self_attn.attention_scores"]
    (broken,) = [row for row in rows if row["kind"] == NO_LONGER_LOADS]
    assert "n_inner" in broken["detail"] and broken["before"] == "passed"
    assert broken["where"] == ["nnterp_text/families/gpt2.py:5 in config", "transformers/models/gpt2/configuration_gpt2.py:10 in __init__"]


def test_a_load_that_raises_source_not_available_is_a_moved_value():
    rows = compare({"gpt2": entry("gpt2", {"contribution": "pass"})}, {"gpt2": entry("gpt2", {}, reason=f"raises {moved_message()}")})
    assert [row["kind"] for row in rows[FAMILY]] == [MOVED_VALUE]
    assert "On gpt2 (raised while loading, before any check)." in render("9.9.9", "cmd", "a baseline", rows, [])


def test_only_a_load_that_raises_no_longer_loads_and_a_failing_value_is_a_finding_of_its_own():
    baseline = {name: entry(name, {"contribution": "pass"}, family=RECURRENT) for name in ("mamba", "bamba", "jamba")}
    new = {
        "mamba": gone("mamba", stage="loading"),
        # the load went through and the kit raised after it: not a checkpoint that no longer loads
        "bamba": gone("bamba", stage="checking"),
        # support() raised on one value: the record kept going, the value fails and the checks ran
        "jamba": entry(
            "jamba",
            {"contribution": "pass", "state_continues_into_decode": "fail"},
            {"state_continues_into_decode": FUNC},
            family=RECURRENT,
            raised_at={"state_continues_into_decode": ROUTING_FRAMES},
            failing_values={"linear_attn.state": {"error": FUNC, "while": "asking its reason", "layers": [0], "raised at": ROUTING_FRAMES}},
        ),
    }
    rows = compare(baseline, new)[RECURRENT]
    assert {(row["checkpoint"], row["kind"]) for row in rows} == {
        ("mamba", NO_LONGER_LOADS),
        ("bamba", RAISES_CHECKED),
        ("jamba", NEWLY_FAILING),
        ("jamba", VALUE_RAISES),
    }
    (value,) = [row for row in rows if row["kind"] == VALUE_RAISES]
    assert value["value"] == "linear_attn.state" and value["while"] == "asking its reason"
    assert value["where"] == ["nnterp_recurrent/routing.py:61 in _cell"]
    # one cause: the same exception raised at the same place, on three checkpoints, whatever it shows as
    (group,) = causes({RECURRENT: rows})
    assert group["type"] == "TypeError" and group["checkpoints"] == ["bamba", "jamba", "mamba"]
    assert group["where"] == ["nnterp_recurrent/routing.py:61 in _cell"]


def test_failures_group_by_exception_pattern_and_place_with_the_most_checkpoints_first():
    other_frames = ["/x/src/nnterp/families/default.py:9 in config"]
    rows = compare({}, {
        "a": gone("a"),
        "b": gone("b", f"{FUNC} on layers[3]"),  # the block index is no part of the cause
        "c": gone("c", f"{FUNC} on layers[12]"),
        "d": gone("d", frames=other_frames),  # the same message raised elsewhere is another cause
        "e": entry("e", {"contribution": "fail"}, {"contribution": "layers[1]: layer_input + attention_output != layer_output: off by 0.25"}),
        "f": entry("f", {"contribution": "fail"}, {"contribution": "layers[0]: layer_input + attention_output != layer_output: off by 3.5"}),
    })
    groups = causes(rows)
    # two checkpoints a cause first; "on layers[i]" is another message than the bare one, and the bare one raised
    # elsewhere is another cause
    assert [group["checkpoints"] for group in groups] == [["b", "c"], ["e", "f"], ["a"], ["d"]]
    identity = groups[1]
    assert identity["type"] == IDENTITY and identity["pattern"] == "layers[i]: layer_input + attention_output != layer_output"
    assert groups[2]["where"] == ["nnterp_recurrent/routing.py:61 in _cell"] and groups[3]["where"] == ["nnterp/families/default.py:9 in config"]
    assert groups[0]["pattern"] == "Func() is not a transformers kernel dispatcher (no 'implementation' it calls) on layers[i]"


def report_rows():
    """A release's findings on five checkpoints: two pass, two no longer load (one cause), one has two moved values."""
    baseline = {name: entry(name, {"contribution": "pass"}) for name in ("gpt2", "gpt2-reorder", "gpt2-gone", "gpt2-gone-too", "gpt2-moved")}
    baseline["gpt2-reorder"] = gone("gpt2-reorder", family=FAMILY)
    moves = {
        "pattern_is_softmax_of_scores": moved_message(),
        "head_outputs_are_pattern_against_values": moved_message("GPT2Attention.attention_probabilities"),
    }
    new = {
        "gpt2": entry("gpt2", {"contribution": "pass"}),
        "gpt2-reorder": entry("gpt2-reorder", {"contribution": "pass", "mid_stream": "skip"}),
        "gpt2-gone": gone("gpt2-gone", family=FAMILY),
        "gpt2-gone-too": gone("gpt2-gone-too", family=FAMILY),
        "gpt2-moved": entry("gpt2-moved", {"contribution": "pass", **dict.fromkeys(moves, "fail")}, moves),
    }
    return compare(baseline, new)


def test_the_headline_counts_each_thing_in_its_own_unit():
    rows = report_rows()
    assert tally(rows) == {
        "checkpoints": 5, "passing": 2, "no_longer_load": 2, "raise_checked": 0,
        "moved_values": 2, "moved_checkpoints": 1,
        "newly_failing_checks": 0, "newly_failing_checkpoints": 0,
        "raising_values": 0, "raising_checkpoints": 0,
        "unchecked_checks": 0, "unchecked_checkpoints": 0,
    }
    text = render("9.9.9", "uv run ... --transformers 9.9.9", "a baseline", rows, [])
    assert "- **Checkpoints: 2 of 5 pass.** 3 checkpoints fail, of which 2 checkpoints no longer load and 0 checkpoints load but raise in the kit." in text
    assert "- **Moved values** (pinned to an operation the forward no longer has): 2 values, on 1 checkpoint." in text
    assert "- **Newly failing identities**: 0 checks, on 0 checkpoints." in text
    assert "- Of the passing checkpoints, 1 checkpoint did not pass in the baseline: gpt2-reorder (did not load)." in text


def test_the_report_puts_failures_first_collapses_passes_and_lists_a_forwards_operations_once():
    added = new_types({"mapping_types": {"causal-LM": ["gpt2", "brand_new", "served_new"]}, "served": ["gpt2", "served_new"]}, {"causal-LM": ["gpt2"]})
    assert added == [("brand_new", "causal-LM")]
    text = render("9.9.9", "uv run ... --transformers 9.9.9", "a baseline", report_rows(), added)
    failures, moved, families = text.index("## Failures by cause"), text.index("## Moved values"), text.index("## By family")
    assert failures < moved < families
    # the two loads that raised are one cause, listing both checkpoints, before the moved values' (one checkpoint)
    first = text[failures:moved].splitlines()[2]
    assert first.startswith("1. **2 checkpoints**: `TypeError: Func() is not a transformers kernel dispatcher")
    assert "raised at `nnterp_recurrent/routing.py:61 in _cell`" in first and "Checkpoints: gpt2-gone, gpt2-gone-too." in first
    # passing checkpoints are counted, not listed
    assert "| gpt2 |" not in text and "| gpt2-reorder |" not in text
    assert "2 checkpoints of this family pass." in text
    assert "| gpt2-gone | no longer loads |  | 1 (baseline: passed) |" in text
    # the operations of the forward, once for both values
    assert text.count("`eager_attention_forward_0`") == 1 and "as for `GPT2Attention.attention_scores`" in text
    assert "| brand_new | causal-LM |" in text


def test_the_package_diff_reads_a_freeze_and_names_what_was_added_removed_and_moved():
    here = pinned("# comment\nnumpy==2.1.0\ntorch==2.9.0\n-e file:///work/packages/nnterp-core\nold-thing==1.0\nzipp @ file:///wheels/zipp.whl\n")
    there = pinned("numpy==2.1.0\ntorch==2.10.0\nKernels==0.19.1\nzipp @ file:///wheels/zipp.whl\n")
    assert here == {"numpy": "2.1.0", "torch": "2.9.0", "old-thing": "1.0", "zipp": "@ file:///wheels/zipp.whl"}
    moves = package_moves(here, there)
    assert moves == [("kernels", None, "0.19.1"), ("old-thing", "1.0", None), ("torch", "2.9.0", "2.10.0")]
    text = render("9.9.9", "cmd", "a baseline", {}, [], moves)
    assert "| kernels | absent | 0.19.1 |" in text and "| old-thing | 1.0 | absent |" in text and "| torch | 2.9.0 | 2.10.0 |" in text
    assert "Not compared" in render("9.9.9", "cmd", "a baseline", {}, [], None)


def test_the_generated_by_line_carries_every_flag_the_run_was_given():
    line = command_line("5.25.0", None, ["mamba", "llama"], Path("docs/families.json"), 2, Path("my report.md"))
    assert line == (
        "uv run --inexact nnterp-conformance upgrade-report --transformers 5.25.0 --checkpoint mamba --checkpoint llama "
        "--baseline docs/families.json --jobs 2 --out 'my report.md'"
    )
    assert shlex.split(line)[-2:] == ["--out", "my report.md"]
    assert command_line("5.25.0") == "uv run --inexact nnterp-conformance upgrade-report --transformers 5.25.0"


def test_jobs_must_be_a_positive_number_of_processes(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["upgrade-report", "--transformers", "5.25.0", "--jobs", "0"])
    assert exit.value.code == 2 and "--jobs: a number of processes, 1 or more (got '0')" in capsys.readouterr().err
    assert upgrade_report("5.25.0", jobs=0) == 2


def test_the_command_writes_outside_the_repository_by_default_and_runs_both_sides_with_the_jobs(tmp_path, monkeypatch, capsys):
    """The command with its environment and its two runs faked: where the report goes, what it says it was run with."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    baseline = tmp_path / "families.json"
    baseline.write_text(json.dumps([entry("gpt2", {"contribution": "pass"}), entry("llama", {"contribution": "pass"}, family="nnterp.families.default")]))
    runs = []

    def run_records(python, checkpoints, out, label, env=None, jobs=1):
        runs.append((label, checkpoints, jobs))
        found = [entry("gpt2", {"contribution": "pass"}), gone("llama", family="nnterp.families.default", stage="loading")]
        return {"records": found, "mapping_types": {"causal-LM": []}, "served": []}, ""

    monkeypatch.setattr(upgrade, "build", lambda release, scratch: None)
    monkeypatch.setattr(upgrade, "run_records", run_records)
    monkeypatch.setattr(upgrade, "packages", lambda scratch: [("kernels", None, "0.19.1")])
    assert cli.main(["upgrade-report", "--transformers", "9.9.9", "--checkpoint", "gpt2", "--checkpoint", "llama", "--baseline", str(baseline), "--jobs", "2"]) == 0
    out = default_out("9.9.9")
    assert out == tmp_path / "nnterp-upgrade" / "upgrade-report-9.9.9.md" and out.exists()
    assert not list(tmp_path.glob("upgrade-report-*.md"))  # nothing in the folder it ran in
    assert runs == [("9.9.9", ["gpt2", "llama"], 2)]  # the baseline file stands in for this side
    text = out.read_text()
    assert f"--checkpoint gpt2 --checkpoint llama --baseline {baseline} --jobs 2`" in text
    assert "**Checkpoints: 1 of 2 pass.**" in text and "| kernels | absent | 0.19.1 |" in text
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == f"wrote {out}"


def gpt2_with_a_reason_that_raises(monkeypatch):
    """The tiny GPT-2 whose ``attention_scores`` cannot say whether it is available: its reason raises, as a recurrent
    value's did on 5.25 when its kernel dispatcher changed shape."""
    from nnterp_conformance.runner import load

    model = load("gpt2")
    value = type(model.layers[0].self_attn).values()["attention_scores"]

    def reason(obj):
        raise TypeError("Func() is not a transformers kernel dispatcher")

    monkeypatch.setattr(value, "reason", reason)
    return model


def test_a_reason_that_raises_fails_that_value_and_the_record_keeps_going(monkeypatch):
    from nnterp_conformance import report
    from nnterp_conformance.value_failures import support_by_value

    model = gpt2_with_a_reason_that_raises(monkeypatch)
    with pytest.raises(TypeError):
        model.support()  # what turned a whole checkpoint into "no longer loads"
    table, failing = support_by_value(model)
    assert list(failing) == ["self_attn.attention_scores"]
    assert failing["self_attn.attention_scores"]["error"] == "TypeError: Func() is not a transformers kernel dispatcher"
    assert failing["self_attn.attention_scores"]["layers"] == list(range(model.num_layers))
    assert "self_attn.attention_probabilities" in table and "self_attn.attention_scores" not in table

    monkeypatch.setattr(report, "half_precision", lambda checkpoint: {"status": "pass", "failed": {}, "why": {}})
    found = report.record(model, "gpt2", details=True)
    # every check ran: those that ask support() fail with what raised and where, the others pass
    assert "pass" in found["checks"].values() and found["checks"]["unavailable_values_raise"] == "fail"
    assert "Func()" in found["details"]["unavailable_values_raise"] and found["raised_at"]["unavailable_values_raise"]
    assert list(found["failing_values"]) == ["self_attn.attention_scores"]
    assert found["status"] == "fail" and "values raise: self_attn.attention_scores" in found["reason"]
    kinds = {row["kind"] for row in compare({"gpt2": entry("gpt2", {"contribution": "pass"})}, {"gpt2": found})[FAMILY]}
    assert VALUE_RAISES in kinds and NO_LONGER_LOADS not in kinds


def test_a_moved_operation_is_found_for_every_value_read_alone(monkeypatch):
    """GPT-2's attention run through a helper, as a release that moved its interior would: each value pinned inside
    it raises ``SourceNotAvailable`` when read, and each is found, not only the first."""
    from nnterp_conformance.runner import PROMPTS, load
    from nnterp_conformance.value_failures import failing_reads

    monkeypatch.setattr(modeling_gpt2.GPT2Attention, "forward", moved_forward)
    failing = failing_reads(load("gpt2"), PROMPTS)
    moved = {name: parse_moved(found["error"]) for name, found in failing.items()}
    assert {"self_attn.attention_scores", "self_attn.attention_probabilities", "self_attn.attention_queries"} <= set(moved)
    assert all(found is not None and found["value"].startswith("GPT2Attention.") for found in moved.values())
    assert "layer_output" not in failing and "self_attn.attention_output" not in failing


#: GPT-2's attention's own forward, which the moved one calls (a global: nnsight recompiles a forward with its globals)
ORIGINAL = modeling_gpt2.GPT2Attention.forward


def moved_forward(self, *args, **kwargs):
    """GPT-2's attention forward as a release that moved its interior into a helper runs it: none of its operations is this one's."""
    return ORIGINAL(self, *args, **kwargs)


@pytest.mark.slow
@pytest.mark.xdist_group("upgrade")
def test_the_command_builds_the_release_and_reports_each_family(tmp_path, capsys):
    """Against transformers 5.23.0 on gpt2 and llama, two processes a side: a scratch environment with that release, the records of both, the report."""
    scratch, out = tmp_path / "env", tmp_path / "report.md"
    arguments = ["upgrade-report", "--transformers", "5.23.0", "--env", str(scratch), "--checkpoint", "gpt2", "--checkpoint", "llama", "--out", str(out), "--jobs", "2"]
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
    assert "- **Checkpoints: " in text and " of 2 pass.**" in text
    # the release the lock pins here against the one tried
    assert f"| transformers | {version('transformers')} | 5.23.0 |" in text
    assert f"--checkpoint gpt2 --checkpoint llama --jobs 2 --out {out}`" in text
    assert text in capsys.readouterr().out


def test_a_config_only_type_a_family_serves_by_its_classes_is_served():
    # param2moe (5.25) names no family but builds GLM-4-MoE's classes, which DeepSeek-V3's family serves
    served = upgrade.served_types(["param2moe", "llama", "brand_new"])
    assert "param2moe" in served and "llama" in served and "brand_new" not in served
    assert "deepseek_v3" in served  # every type a family names, whether or not the list asked for it
    assert new_types({"mapping_types": {"causal-LM": ["param2moe", "brand_new"]}, "served": served}, {"causal-LM": []}) == [("brand_new", "causal-LM")]
