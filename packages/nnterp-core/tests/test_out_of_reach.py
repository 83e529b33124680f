"""A type nnterp keeps out of reach is refused at load with its reason; a proof whose read raises names the identity and the operation."""

from __future__ import annotations

import json
import re
import warnings

import pytest
import torch

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import StandardizedTransformer, Unavailable
from nnterp.errors import FamilyNotFound, UnprovenFamily
from nnterp.reach import REASONS, STRUCTURE, OutOfReach, reason
from nnterp.reach_vision import ENCODER_FREE, VISION_KINDS
from nnterp.tiny import TinyConfig
from nnterp_conformance.checkpoints import write_checkpoint
from nnterp_conformance.unregistered import FeedForward, written


def test_a_tiny_checkpoint_of_an_out_of_reach_type_is_refused_with_its_reason(tmp_path):
    # dory (an nGPT block with looped layers) builds and loads; without the refusal it is inferred as a sandwich block
    write_checkpoint(TinyConfig("dory"), tmp_path)
    with pytest.raises(OutOfReach) as raised:
        StandardizedTransformer(tmp_path)
    error = raised.value
    assert isinstance(error, FamilyNotFound) and error.model_type == "dory" and error.reason == STRUCTURE["dory"]
    message = str(error)
    assert "model type 'dory'" in message and "an nGPT block on the unit sphere" in message
    assert "family=" in message and "docs/adding-a-family.md" in message


@pytest.mark.parametrize(
    ("model_type", "expected"),
    [("xlstm", REASONS["xlstm"]), ("hrm_text", REASONS["hrm_text"]), ("inkling2_loop_text", REASONS["inkling2_loop_text"]), ("fuyu", ENCODER_FREE)],
)
def test_each_table_gives_the_load_its_reason(tmp_path, model_type, expected):
    # refused before anything is built: the config names the type, no weights are read
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    with pytest.raises(OutOfReach, match=re.escape(expected[:60])):
        StandardizedTransformer(tmp_path)
    assert reason(model_type) == expected  # a wrapper gets the vision table's reason, more specific than "a vision-language wrapper"


def test_a_reason_about_the_kits_tiny_checkpoint_alone_refuses_no_load():
    from nnterp.reach import refuse

    assert reason("qwen4_exp_text") is not None
    refuse("qwen4_exp_text")  # raises nothing: a real checkpoint builds, and is inferred and proven as any other


def test_a_type_out_of_reach_whose_classes_a_family_serves_still_loads_with_it(tmp_path):
    from nnterp import registry
    from nnterp._resolution import resolve

    served = registry.family_of_classes(list(registry.mapped_classes("pp_chart2table")))
    if served is None:
        pytest.skip("no installed family serves GotOcr2ForConditionalGeneration (nnterp-vision)")
    assert "pp_chart2table" in {model_type for model_types in VISION_KINDS.values() for model_type in model_types}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "pp_chart2table"}))
    assert resolve(str(tmp_path), {}).name == served[0].name


def broken_forward(self, x: torch.Tensor) -> torch.Tensor:
    """FeedForward's forward with a tensor-size mistake: its up projection viewed to a width that does not divide it."""
    return self.w_out(self.act(self.w_gate(x)) * self.w_up(x).view(-1, 7))


def test_a_proof_whose_reads_raise_names_the_identity_the_value_and_the_operation(tmp_path, monkeypatch):
    path = written(tmp_path)
    monkeypatch.setattr(FeedForward, "forward", broken_forward)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnprovenFamily)
        model = StandardizedTransformer(path)
    assert model.family.inferred and not model.proof.holds
    why = model.proof.refuted[(0, "mlp.mlp_output")]
    assert re.match(
        r"the proof at load could not check contribution \(.*\): reading mlp\.mlp_output on layers\[0\], .* raised RuntimeError "
        r"in broken_forward \(test_out_of_reach\.py:\d+: return .*\.view\(-1, 7\)\)\) of body\.blocks\.0\.ffn \(FeedForward\): shape",
        why,
    ), why
    # every refutation says which identity it was checking: none is a bare tensor-size message
    assert all(reason.startswith("the proof at load could not check ") and " raised RuntimeError in " in reason for reason in model.proof.refuted.values())
    with pytest.raises(Unavailable, match=re.escape(why[:80])), torch.no_grad(), model.trace("Hello"):
        model.layers[0].mlp.mlp_output.save()
