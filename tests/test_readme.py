"""Every Python example in the README runs, as a script of its own."""

import re
import runpy
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_examples_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no Python example"
    for index, block in enumerate(blocks):
        script = tmp_path / f"readme_{index}.py"
        script.write_text(block)  # nnsight reads a trace's source from its file
        runpy.run_path(str(script), run_name="__main__")
