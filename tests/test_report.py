"""docs/families.{json,md} are what the kit finds now: regenerated record by record, in each checkpoint's group."""

import json
from pathlib import Path

import pytest

from nnterp_conformance import report
from nnterp_conformance.checkpoints import names

DOCS = Path(__file__).resolve().parent.parent / "docs"
STALE = "docs/families.json is stale ({}): run uv run nnterp-conformance report"


def committed():
    return json.loads((DOCS / "families.json").read_text())


def test_each_checkpoint_record_is_current(nnterp_model, nnterp_checkpoint):
    fresh = report.record(nnterp_model, nnterp_checkpoint, half_precision_profile=False)
    recorded = dict(report.checkpoint_records(committed()).get(nnterp_checkpoint) or {})
    recorded.pop("half_precision", None)
    assert recorded == fresh, STALE.format(nnterp_checkpoint)


@pytest.mark.half_precision
def test_each_checkpoint_half_precision_profile_is_current(nnterp_checkpoint):
    """The bfloat16 profile of each record (a load and a kit run of its own): `uv run pytest -m half_precision`."""
    recorded = report.checkpoint_records(committed()).get(nnterp_checkpoint) or {}
    assert recorded.get("half_precision") == report.half_precision(nnterp_checkpoint), STALE.format(f"{nnterp_checkpoint}, bfloat16")


def test_the_report_covers_every_checkpoint_and_mapping_type():
    records = committed()
    assert sorted(report.checkpoint_records(records)) == names(), STALE.format("checkpoints")
    covered = {entry["model_type"] for entry in records if entry["status"] != report.OUT_OF_REACH}
    expected = [report.out_of_reach(model_type) for model_type in report.mapping_types() if model_type not in covered]
    assert [entry for entry in records if entry["status"] == report.OUT_OF_REACH] == expected, STALE.format("out of reach")
    assert report.merge(list(report.checkpoint_records(records).values())) == [e for e in records if e["status"] != report.OUT_OF_REACH]


def test_the_markdown_is_rendered_from_the_json():
    assert (DOCS / "families.md").read_text() == report.render_markdown(committed()), STALE.format("families.md")


def test_the_readme_headline_is_the_reports_count():
    readme = (DOCS.parent / "README.md").read_text()
    assert report.with_headline(readme, committed()) == readme, "the README's headline is stale: run uv run nnterp-conformance report"


def test_every_half_precision_failure_is_declared_with_why():
    # the report's bfloat16 failures are exactly what each family declares, so the table says why for every row
    from nnterp.registry import checkpoint_family, family_named

    for checkpoint, entry in report.checkpoint_records(committed()).items():
        declared = family_named(checkpoint_family(checkpoint)).half_precision_failures.get(checkpoint, {})
        failed = entry["half_precision"]["failed"]
        assert set(failed) == set(declared), f"{checkpoint}: fails {sorted(failed)} in bfloat16, its family declares {sorted(declared)}"


def test_processes_sharing_the_checkpoints_give_the_same_records():
    chosen = ["gpt2", "doge", "llama"]
    shared = report.collect(progress=False, checkpoints=chosen, jobs=2)
    assert shared == report.collect(progress=False, checkpoints=chosen)
    assert [entry["checkpoint"] for entry in shared if entry["status"] != report.OUT_OF_REACH] == sorted(chosen)
