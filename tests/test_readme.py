"""Every Python example in the README and the docs runs, as a script of its own.

A block fenced ```` ```python fragment ```` is a piece of a file, shown but not run; one fenced ```` ```python ndif ````
runs against the local NDIF server (``scripts/ndif_stack.py``), and one fenced ```` ```python vllm ```` by vLLM's
environment (``scripts/vllm_env.py``).
"""

import importlib.util
import os
import subprocess
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def run_blocks(tmp_path: Path, page: Path, blocks: list[str]) -> None:
    """Run a page's blocks in this process; a check a page registers (``@check``) is gone after it, so a later
    test's ``run`` or ``report.collect`` in this worker sees the kit's checks only."""
    from nnterp_conformance.checks import CHECKS, load_plugins

    load_plugins()  # the kit's and the installed plugins' checks are registered before the snapshot
    registered = dict(CHECKS)
    try:
        for index, block in enumerate(blocks):
            script = tmp_path / f"{page.stem}_{index}.py"
            script.write_text(block)  # nnsight reads a trace's source from its file
            runpy.run_path(str(script), run_name="__main__")
    finally:
        CHECKS.clear()
        CHECKS.update(registered)


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_examples_run(tmp_path, page):
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    if page.name == "README.md":
        assert blocks, "the README has no Python example"
    run_blocks(tmp_path, page, blocks)


def test_a_page_that_registers_a_check_leaves_the_kit_as_it_was(tmp_path):
    """adding-a-family.md registers ``gate_activates``; a later ``report.collect`` in this worker must not run it."""
    from nnterp_conformance.checks import CHECKS

    page = ROOT / "docs" / "adding-a-family.md"
    before = set(CHECKS)
    run_blocks(tmp_path, page, re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))
    assert "gate_activates" not in before and set(CHECKS) == before


NDIF = re.compile(r"```python ndif\n(.*?)```", flags=re.S)
NDIF_PAGES = [page for page in PAGES if NDIF.search(page.read_text())]


@pytest.mark.xdist_group("ndif_server")
@pytest.mark.parametrize("page", NDIF_PAGES, ids=[page.name for page in NDIF_PAGES])
def test_examples_against_the_local_ndif_server_run(tmp_path, page):
    """Blocks fenced ```` ```python ndif ```` run against ``scripts/ndif_stack.py``'s server; skipped where none runs (failed under CI)."""
    spec = importlib.util.spec_from_file_location("ndif_client", ROOT / "tests" / "ndif_client.py")
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    client.api_or_skip()
    run_blocks(tmp_path, page, NDIF.findall(page.read_text()))


VLLM = re.compile(r"```python vllm\n(.*?)```", flags=re.S)
VLLM_PAGES = [page for page in PAGES if VLLM.search(page.read_text())]


@pytest.mark.xdist_group("vllm")
@pytest.mark.parametrize("page", VLLM_PAGES, ids=[page.name for page in VLLM_PAGES])
def test_examples_on_vllm_run(tmp_path, page):
    """Blocks fenced ```` ```python vllm ```` run as scripts by vLLM's environment; skipped where it is not built (failed under CI)."""
    python = Path(os.environ.get("NNTERP_VLLM_ENV", ROOT / ".vllm")) / "bin" / "python"
    if not python.exists():
        message = f"vLLM's environment is not built ({python}): uv run python scripts/vllm_env.py build"
        if os.environ.get("NNTERP_REQUIRE_VLLM"):
            pytest.fail(message)
        pytest.skip(message)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    for index, block in enumerate(VLLM.findall(page.read_text())):
        script = tmp_path / f"{page.stem}_vllm_{index}.py"
        script.write_text(block)
        done = subprocess.run([str(python), str(script)], capture_output=True, text=True, timeout=600, env=environment, cwd=tmp_path)
        assert done.returncode == 0, f"{page.name}, vLLM block {index}:\n{done.stderr[-4000:]}"
