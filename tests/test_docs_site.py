"""The documentation site builds with every warning an error, and its reference pages are read off the docstrings."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strict_with_the_reference_from_docstrings(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
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
