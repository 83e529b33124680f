"""Finding families: by model type, with an error that says what to install or write."""

import subprocess
import sys
from pathlib import Path

import pytest
from nnterp import FamilyNotFound
from nnterp.registry import family_for

ROOT = Path(__file__).resolve().parents[3]


def test_a_type_served_by_a_missing_package_names_the_package(monkeypatch):
    from nnterp import registry

    empty = registry.Catalog(modules={}, model_types={})
    monkeypatch.setattr(registry, "indexed", lambda: empty)
    monkeypatch.setattr(registry, "catalog", lambda: empty)
    with pytest.raises(FamilyNotFound, match="served by the nnterp-text package"):
        family_for("gpt2")


def test_a_type_no_package_serves_says_no_family_exists_yet():
    with pytest.raises(FamilyNotFound, match="no nnterp family exists yet for model type 'reformer'"):
        family_for("reformer")


def test_unknown_family_fails_before_anything_loads(tmp_path):
    from nnterp import StandardizedTransformer

    (tmp_path / "config.json").write_text('{"model_type": "reformer"}')
    with pytest.raises(FamilyNotFound):
        StandardizedTransformer(tmp_path)


def test_the_catalogs_and_the_served_table_are_generated_from_the_families():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "catalogs.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_nnterp_imports_no_family_package_nor_test_tools():
    probe = "import sys, nnterp; print(sorted(m for m in ('nnterp_text', 'nnterp_conformance', 'hypothesis', 'pytest') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_import_probe_can_fail():
    probe = "import sys, nnterp, hypothesis; print(sorted(m for m in ('hypothesis',) if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['hypothesis']"
