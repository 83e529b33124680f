"""assert_conforms: the one assertion a family's own tests make."""

import pytest
from nnterp_conformance.runner import assert_conforms

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
INTERIOR = (
    "pattern_is_softmax_of_scores",
    "written_pattern_moves_logits",
    "head_outputs_make_the_projection",
    "scores_are_queries_against_keys",
    "head_outputs_are_pattern_against_values",
)


def test_the_skips_a_family_expects_pass(tiny_model):
    verdicts = assert_conforms(tiny_model("gpt2-reorder"), PROMPTS, {name: "reorder_and_upcast_attn" for name in INTERIOR})
    assert sum(verdict.status == "pass" for verdict in verdicts) == len(verdicts) - len(INTERIOR)


def test_an_unexpected_skip_fails(tiny_model):
    with pytest.raises(AssertionError, match="skipped"):
        assert_conforms(tiny_model("gpt2-reorder"), PROMPTS)


def test_a_skip_for_another_reason_fails(tiny_model):
    with pytest.raises(AssertionError, match="expected a reason with"):
        assert_conforms(tiny_model("gpt2-reorder"), PROMPTS, dict.fromkeys(INTERIOR, "sdpa"))
