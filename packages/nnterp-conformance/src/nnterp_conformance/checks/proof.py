"""The proof at load withdraws nothing on a family the kit proves: its cheap identities agree with the kit's."""

from __future__ import annotations

from typing import Any

from .base import Case, CheckFailure, check


@check("residual", drawn=False)
def proof_at_load_holds(model: Any, case: Case) -> str:
    """nnterp.proof's identities hold on the checkpoint, so a load with verify=True serves every value the family declares."""
    from nnterp.proof import prove

    proof = prove(model, withdraw=False)
    failed = [str(finding) for finding in proof.findings if finding.status == "fails"]
    if failed:
        raise CheckFailure("the proof at load would withdraw values: " + "; ".join(failed))
    held = [finding.identity.split(" ")[0] for finding in proof.findings if finding.status == "holds"]
    return f"holds: {', '.join(held) or 'nothing applies'}"
