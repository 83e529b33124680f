"""The documentation site builds with every warning an error, and its reference pages are read off the docstrings.

tests/test_docs_browser.py opens the same build in a headless browser: under pytest-xdist the two
share one build per session (``built_site``), since the build also draws the toolkit's plots.
"""

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def build(directory: Path) -> dict:
    """``mkdocs build --strict`` into ``directory``: its exit status and what it printed on stderr."""
    ran = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(directory)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return {"returncode": ran.returncode, "stderr": ran.stderr}


def built_site(tmp_path_factory) -> tuple[Path, dict]:
    """The site as the strict build writes it, once per test session: under xdist the first worker to ask
    builds it into the session's shared temporary folder while the others wait on a lock."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        directory = tmp_path_factory.mktemp("site")
        return directory, build(directory)
    directory = tmp_path_factory.getbasetemp().parent / "docs-site"
    with open(f"{directory}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        outcome = Path(f"{directory}.json")
        if not outcome.exists():
            outcome.write_text(json.dumps(build(directory)))
        return directory, json.loads(outcome.read_text())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    directory, outcome = built_site(tmp_path_factory)
    assert outcome["returncode"] == 0, outcome["stderr"]
    return directory


def test_the_site_builds_strict_with_the_reference_from_docstrings(site):
    tmp_path = site
    values = (tmp_path / "values" / "index.html").read_text()
    # mkdocstrings rendered the components' own docstrings, value by value
    for name in ("layer_output", "attention_probabilities", "mlp_neurons", "router_logits"):
        assert name in values, name
    assert "The residual stream leaving this block" in values
    api = (tmp_path / "api" / "index.html").read_text()
    for name in ("route_kernels", "state_output", "chunk_per_token"):
        assert name in api, name
    families = (tmp_path / "families" / "index.html").read_text()
    assert "model types pass the whole kit" in families
    # the theme: highlighted code (a fragment too) and the script that sorts and filters the long tables
    tutorial = (tmp_path / "tutorial-induction-head" / "index.html").read_text()
    assert "```python fragment" not in tutorial and 'class="language-python highlight"' in tutorial
    assert "javascripts/tables.js" in families and (tmp_path / "javascripts" / "tables.js").is_file()
    # the toolkit's plots, drawn by the build from the page's own example (docs/hooks/plots.py)
    toolkit = (tmp_path / "toolkit" / "index.html").read_text()
    for name in ("lens.png", "pattern.png", "sweep.png"):
        image = tmp_path / "img" / "toolkit" / name
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"../img/toolkit/{name}" in toolkit, name
    assert not (tmp_path / "hooks").exists()
