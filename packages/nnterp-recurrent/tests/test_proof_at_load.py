"""The proof at load on a recurrent family whose kernel call a release moved: the stream identities still hold, and the
proof says that the mixer's values are not proven rather than a clean bill.

transformers 5.25 moved Mamba's scan into ``mamba_scan_forward``: its blocks still add up, so the stream identities
held and the load warned "N identities hold, none fails", while every value read at the scan raised. The test
builds that situation on the locked release by running ``MambaMixer.forward`` through a helper, so the call the
scan's values are read under is no operation of the forward nnsight instruments.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from nnterp import StandardizedTransformer
from nnterp.errors import Unavailable, UnprovenFamily
from nnterp_conformance.checkpoints import spec, tiny_checkpoint
from nnterp_recurrent.components.selective_scan import SelectiveScan
from transformers.models.mamba import modeling_mamba

#: MambaMixer's own forward, which the moved one calls
ORIGINAL = modeling_mamba.MambaMixer.forward
#: the operation of the forward the scan's values are read under, which the moved forward no longer has
MOVED = SelectiveScan.CHUNK_KERNEL.split(".")[0]


def moved_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    """MambaMixer's forward as a release that moved the scan into a helper runs it: the scan is no operation of this one."""
    return ORIGINAL(self, *args, **kwargs)


def proved_load() -> tuple[Any, str]:
    """The tiny Mamba, proved at load, and what the proof warned (a load proving a family on the locked release
    because it was asked warns only where an identity fails, so the proof is asked again with a reason to say it)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnprovenFamily)
        model = StandardizedTransformer(tiny_checkpoint("mamba"), **{**spec("mamba").load, "verify": True})
        if not caught:
            model.verify(because=["asked by the test"])
    said = [str(warning.message) for warning in caught if issubclass(warning.category, UnprovenFamily)]
    assert len(said) == 1, said
    return model, said[0]


def test_a_moved_scan_withdraws_the_mixers_values_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modeling_mamba.MambaMixer, "forward", moved_forward)
    model, said = proved_load()
    stream = {finding.identity.split(" ")[0]: finding.status for finding in model.proof.findings}
    assert stream["contribution"] == "holds" and stream["stream_continuity"] == "holds"
    withdrawn = {name for _, name in model.proof.refuted}
    assert {"linear_attn.state_input", "linear_attn.attention_queries", "linear_attn.attention_keys"} <= withdrawn, withdrawn
    reason = model.proof.refuted[(0, "linear_attn.attention_queries")]
    assert "could not check every_value_reads" in reason and MOVED in reason, reason
    assert "none fails" not in said and "linear_attn.attention_queries" in said
    with pytest.raises(Unavailable, match=MOVED), torch.no_grad(), model.trace("Hello"):
        model.layers[0].linear_attn.attention_queries.save()


def test_an_unmoved_mamba_names_what_it_proved_and_what_it_did_not() -> None:
    model, said = proved_load()
    assert model.proof.holds
    assert "attention_output" in " ".join(model.proof.proved)
    assert "linear_attn.attention_queries" in model.proof.unproven and "linear_attn.attention_queries" not in model.proof.proved
    assert "Served but proven by no identity at load" in said and "linear_attn.state_input" in said


def test_a_value_computed_from_a_moved_one_says_what_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    from nnterp.errors import OtherComponent
    from nnterp_conformance.runner import load

    monkeypatch.setattr(modeling_mamba.MambaMixer, "forward", moved_forward)
    model = load("mamba")
    # betas and decays are computed from values read at the scan: what the user reads is the scan's move, not
    # "decays belongs to LinearAttention" (a getter's AttributeError made Python blame the attribute)
    for name in ("betas", "decays"):
        with pytest.raises(AttributeError, match=MOVED) as raised, torch.no_grad(), model.trace("Hello"):
            getattr(model.layers[0].linear_attn, name).save()
        assert not isinstance(raised.value, OtherComponent), raised.value
