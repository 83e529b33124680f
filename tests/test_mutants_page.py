"""docs/mutants.md lists the catalogues the mutation tests run: rendered again from them and compared with the page."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_mutation_catalogue_page_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutants_page.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]


def test_every_interior_identity_kills_a_mutant_of_the_catalogue():
    # an identity no wrong family fails could hold of anything: each new one is named by a row of the page
    import re

    from nnterp_conformance.report import INTERIOR

    named = set(re.findall(r"\| `(\w+)` \|", (ROOT / "docs" / "mutants.md").read_text()))
    identities = {name for group in INTERIOR.values() for name in group}
    assigning = {"assigning_what_was_read_changes_nothing", "tower_values_assigned_back_change_nothing", "written_states_land"}
    assert identities | assigning <= named, sorted((identities | assigning) - named)
