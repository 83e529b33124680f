"""Every Python example in the README and the docs runs, as a script of its own.

A block fenced ```` ```python fragment ```` is a piece of a file, shown but not run.
"""

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_examples_run(tmp_path, page):
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    if page.name == "README.md":
        assert blocks, "the README has no Python example"
    for index, block in enumerate(blocks):
        script = tmp_path / f"{page.stem}_{index}.py"
        script.write_text(block)  # nnsight reads a trace's source from its file
        runpy.run_path(str(script), run_name="__main__")
