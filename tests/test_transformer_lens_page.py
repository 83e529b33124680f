"""docs/transformer-lens.md is rendered from nnterp.toolkit.names.HOOKS: rendered again and compared with the page."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_transformer_lens_page_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "transformer_lens_page.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]


def test_the_page_names_every_hook_of_the_table():
    from nnterp.toolkit.names import HOOKS

    page = (ROOT / "docs" / "transformer-lens.md").read_text()
    missing = [hook.spelled for hook in HOOKS if f"| `{hook.spelled}` |" not in page]
    assert not missing, missing
