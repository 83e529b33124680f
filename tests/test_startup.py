"""Loading a checkpoint imports its own family and nothing else registered: no other family is imported to find it."""

import json
import subprocess
import sys

FAMILY_PACKAGES = ("nnterp_text.families.", "nnterp_recurrent.families.", "nnterp_vision.families.", "nnterp_toy")

IMPORTED = """
import json, sys
import nnterp
{action}
print(json.dumps(sorted(name for name in sys.modules if name.startswith({packages!r}))))
"""


def imported_after(action: str) -> set[str]:
    """The family modules a fresh process holds after ``action``."""
    code = IMPORTED.format(action=action, packages=FAMILY_PACKAGES)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_loading_a_checkpoint_imports_only_its_family():
    from nnterp_conformance.checkpoints import tiny_checkpoint

    path = tiny_checkpoint("gpt2")
    alone = imported_after("import nnterp_text.families.gpt2")
    loaded = imported_after(f"from nnterp import StandardizedTransformer\nStandardizedTransformer({str(path)!r})")
    assert "nnterp_text.families.gpt2" in loaded
    assert loaded == alone, f"loading gpt2 imported other families: {sorted(loaded - alone)}"


def test_a_single_family_entry_is_imported_only_when_the_catalogs_miss():
    # the toy family registers one Family (not a catalog): a catalog's type never imports it, its own type does
    assert not any(name.startswith("nnterp_toy") for name in imported_after("from nnterp.registry import family_for\nfamily_for('llama')"))
    assert "nnterp_toy" in imported_after("from nnterp.registry import family_for\nfamily_for('nnterp_toy')")
