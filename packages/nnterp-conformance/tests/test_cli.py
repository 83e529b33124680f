"""The nnterp-conformance command: the table, the verdicts, JSON, and the exit status."""

import json

from nnterp_conformance import cli


def test_check_prints_values_and_verdicts_and_exits_zero(capsys):
    assert cli.main(["check", "gpt2"]) == 0
    out = capsys.readouterr().out
    assert "self_attn.attention_probabilities" in out and "available" in out
    assert "PASS  contribution:" in out
    assert " 0 failed" in out


def test_json_holds_the_support_and_each_check(capsys):
    assert cli.main(["check", "gpt2-reorder", "--json", "--only", "contribution", "--only", "pattern_is_softmax_of_scores"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["family"] == "nnterp_text.families.gpt2"
    assert record["checks"]["contribution"]["status"] == "pass"
    assert record["checks"]["pattern_is_softmax_of_scores"]["status"] == "skip"
    assert "reorder_and_upcast_attn" in record["support"]["self_attn.attention_scores"]["0"]


def test_a_failing_check_makes_the_exit_status_non_zero(capsys, monkeypatch):
    from nnterp_conformance.checks import base

    def broken(model, prompts):
        raise base.CheckFailure("layers[0]: off by 1")

    monkeypatch.setitem(base.CHECKS, "contribution", base.Check("contribution", broken, "residual", "broken on purpose"))
    assert cli.main(["check", "llama", "--only", "contribution"]) == 1
    assert "FAIL  contribution: layers[0]: off by 1" in capsys.readouterr().out


def test_mutants_prints_each_kill_and_the_score(capsys):
    from nnterp_conformance.mutants import standard_mutants

    proposed = standard_mutants("llama")
    assert cli.main(["mutants", "llama"]) == 0
    out = capsys.readouterr().out
    assert "killed    llama: queries and keys swapped  [scores_are_queries_against_keys]" in out
    assert out.count("\nkilled    ") + out.startswith("killed    ") == len(proposed)
    assert f"mutation score: {len(proposed)}/{len(proposed)} (100%)" in out


def test_a_surviving_mutant_makes_the_exit_status_non_zero(capsys, monkeypatch):
    from nnterp_conformance.checks import base

    def passes(model, prompts):
        return "nothing checked"

    monkeypatch.setitem(base.CHECKS, "pattern_is_softmax_of_scores", base.Check("pattern_is_softmax_of_scores", passes, "attention", "too weak on purpose"))
    from nnterp_conformance.mutants import standard_mutants

    total = len(standard_mutants("llama"))
    assert cli.main(["mutants", "llama"]) == 1
    out = capsys.readouterr().out
    assert "SURVIVES  llama: pattern read at the scores" in out and f"mutation score: {total - 1}/{total} (" in out
