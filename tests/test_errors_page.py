"""docs/errors.md is what the library prints now: every case rerun, its message compared with the page."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_common_errors_page_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "errors_page.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
