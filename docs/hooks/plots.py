"""mkdocs hook: the toolkit page's plots are drawn by the build, with the page's own example code.

The ```` ```python ```` block under the toolkit page's "Plots" heading is the code a reader copies, and
tests/test_readme.py runs it as it stands. The build runs that same text once more, as a script of
its own in a fresh interpreter whose ``TMPDIR`` is a scratch folder, so the folder the block makes
with ``tempfile.mkdtemp()`` lies inside it. Each image the page shows from ``img/toolkit/`` is the
PNG of that name the block wrote there. The script starts before the pages are rendered and is
waited for only before the site's files are copied, so drawing overlaps the rest of the build. A
block that fails, or an image the page shows that the block did not draw, fails the build.

The hook also reads a fence ```` ```python fragment ```` (a piece of a file, shown but not run by
tests/test_readme.py) and one ```` ```python ndif ```` (run there against the local NDIF server) as
```` ```python ````, so that they are highlighted like the rest.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

#: the page whose example draws the plots, the heading its drawing block sits under, and where its PNGs are in the site
PAGE = "toolkit.md"
HEADING = "## Plots"
TARGET = "img/toolkit"

FRAGMENT = re.compile(r"^(\s*)```python (?:fragment|ndif|vllm)[ \t]*$", re.M)
SHOWN = re.compile(r"\]\(" + re.escape(TARGET) + r"/([\w.-]+\.png)\)")


class Drawing:
    """One run of the drawing block: the script's process and the folder its ``tempfile.mkdtemp()`` lies in."""

    def __init__(self, code: str, root: Path):
        self.scratch = Path(tempfile.mkdtemp(prefix="nnterp-docs-plots-"))
        atexit.register(shutil.rmtree, self.scratch, ignore_errors=True)
        script = self.scratch / "toolkit_plots.py"  # nnsight reads a trace's source from its file
        script.write_text(code)
        self.made = self.scratch / "tmp"
        self.made.mkdir()
        self.log = self.scratch / "log.txt"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(script)], cwd=root, env={**os.environ, "TMPDIR": str(self.made)}, stdout=log, stderr=subprocess.STDOUT
            )

    def image(self, name: str) -> Path | None:
        """The PNG ``name`` the block wrote under the scratch ``TMPDIR`` (in the folder it made there), None before it has."""
        found = sorted(self.made.rglob(name))
        return found[0] if len(found) == 1 else None

    def wait(self, shown: list[str]) -> None:
        if self.process.wait() != 0:
            raise PluginError(f"the {HEADING!r} example of {PAGE} failed while drawing the site's plots:\n{self.log.read_text()}")
        missing = [name for name in shown if self.image(name) is None]
        if missing:
            raise PluginError(f"{PAGE} shows {missing} from {TARGET}/, which its {HEADING!r} example did not write")


#: the drawing of each version of the block, by the hash of its code: ``mkdocs serve`` redraws only when the code
#: changes. It loads this hook afresh for every rebuild, so the drawings are kept on a module that stays.
_kept = sys.modules.setdefault("nnterp_docs_plots_drawings", types.ModuleType("nnterp_docs_plots_drawings"))
_drawings: dict[str, Drawing] = _kept.__dict__.setdefault("drawings", {})
_current: list = [None, []]


def drawing_block(markdown: str) -> str:
    """The first ```` ```python ```` block after the plots heading of the page's markdown."""
    after = markdown.split("\n" + HEADING + "\n", 1)
    found = re.search(r"^```python\n(.*?)^```", after[-1], flags=re.S | re.M) if len(after) == 2 else None
    if found is None:
        raise PluginError(f"{PAGE} has no ```python block under a {HEADING!r} heading for the hook to draw the plots with")
    return found.group(1)


def on_pre_build(config):
    markdown = (Path(config["docs_dir"]) / PAGE).read_text()
    code = drawing_block(markdown)
    key = hashlib.sha256(code.encode()).hexdigest()
    if key not in _drawings:
        _drawings[key] = Drawing(code, Path(config["config_file_path"]).parent)
    _current[:] = [_drawings[key], sorted(set(SHOWN.findall(markdown)))]


def on_files(files, config):
    drawing, shown = _current
    for name in shown:
        # where the PNG will be is known once the block has run (on_env): a placeholder until then
        files.append(File.generated(config, f"{TARGET}/{name}", abs_src_path=str(drawing.made / name)))
    return files


def on_page_markdown(markdown, page, config, files):
    return FRAGMENT.sub(r"\1```python", markdown)


def on_env(env, config, files):
    # after the pages are rendered, before the files are copied: the drawing must be done and complete
    drawing, shown = _current
    try:
        drawing.wait(shown)
    except PluginError:
        # drawn again on the next build, not kept failed
        _drawings.pop(next(key for key, kept in _drawings.items() if kept is drawing), None)
        raise
    for name in shown:
        files.get_file_from_path(f"{TARGET}/{name}").abs_src_path = str(drawing.image(name))
    return env
