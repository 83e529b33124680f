"""docs/errors.md is what the library prints now: every case rerun, its message compared with the page."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_common_errors_page_is_current():
    spec = importlib.util.spec_from_file_location("errors_page", ROOT / "scripts" / "errors_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    assert (ROOT / "docs" / "errors.md").read_text() == page.render(), "docs/errors.md is stale: run uv run python scripts/errors_page.py"
