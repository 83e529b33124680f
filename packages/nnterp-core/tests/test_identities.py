"""The identities, written once: their sides and their tolerance rules, and the proof at load judging by them."""

import pytest
import torch
from nnterp import identities
from nnterp.identities import (
    CONTRIBUTION,
    HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES,
    STREAM_CONTINUITY,
    IdentityMismatch,
    heads_from_pattern,
    softmax_pattern,
    stream_sum,
)
from nnterp.tolerances import tolerance

GENERATOR = torch.Generator().manual_seed(0)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=GENERATOR).to(dtype)


def test_a_sum_within_rounding_holds_and_one_term_off_fails_naming_the_gap():
    stream, attention, mlp = randn(2, 5, 8), randn(2, 5, 8), randn(2, 5, 8)
    output = stream + attention + mlp
    assert CONTRIBUTION.judge(output, stream_sum(stream, [attention, mlp])).ok
    verdict = CONTRIBUTION.judge(output + 1e-2, stream_sum(stream, [attention, mlp]))
    assert not verdict.ok and verdict.gap == pytest.approx(1e-2, rel=1e-3) and verdict.detail.startswith("off by 0.01")


def test_the_tolerance_is_the_dtype_given():
    stream, term = randn(4, 8), randn(4, 8)
    nudged = stream + term + 5 * tolerance(torch.float32) * (stream + term).abs().max()
    assert not CONTRIBUTION.judge(nudged, stream_sum(stream, [term])).ok
    assert CONTRIBUTION.judge(nudged, stream_sum(stream, [term]), dtype=torch.bfloat16).ok


def test_the_stream_handed_on_must_be_the_same_tensor_bit_for_bit():
    stream = randn(2, 3, 8)
    assert STREAM_CONTINUITY.judge(stream.clone(), stream).ok
    one_ulp = torch.nextafter(stream, torch.full_like(stream, torch.inf))
    assert not STREAM_CONTINUITY.judge(one_ulp, stream).ok


def test_shapes_that_differ_fail_before_any_gap():
    verdict = CONTRIBUTION.judge(randn(2, 3, 8), randn(2, 4, 8))
    assert not verdict.ok and verdict.detail == "shapes differ, (2, 3, 8) against (2, 4, 8)"


def test_a_sink_column_takes_its_share_of_every_row():
    scores = randn(1, 2, 3, 3)
    plain, sunk = softmax_pattern(scores), softmax_pattern(scores, sinks=torch.zeros(2))
    assert torch.allclose(plain.sum(-1), torch.ones(1, 2, 3))
    assert (sunk.sum(-1) < 1).all() and sunk.shape == plain.shape


def test_grouped_values_serve_their_query_heads_and_mismatches_say_why():
    pattern = torch.softmax(randn(1, 4, 3, 3), dim=-1)
    values = randn(1, 2, 3, 5)
    heads = heads_from_pattern(pattern, values)
    assert heads.shape == (1, 3, 4, 5)
    # query heads 0 and 1 read key/value head 0
    assert torch.allclose(heads[:, :, 1], (pattern[:, 1] @ values[:, 0]))
    assert HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES.judge(heads, heads_from_pattern(pattern, values)).ok
    with pytest.raises(IdentityMismatch, match="mixes torch.float32 with torch.bfloat16"):
        heads_from_pattern(pattern, values.bfloat16())
    with pytest.raises(IdentityMismatch, match="3 key/value heads cannot serve 4 query heads"):
        heads_from_pattern(pattern, randn(1, 3, 3, 5))
    with pytest.raises(IdentityMismatch, match="cover 3 keys, attention_values 2"):
        heads_from_pattern(pattern, randn(1, 2, 2, 5))


@pytest.mark.parametrize("checkpoint", ["llama", "gemma2", "bloom", "qwen3_next", "gpt_oss"])
def test_the_proof_at_load_names_and_judges_by_the_identities(checkpoint):
    from nnterp import StandardizedTransformer
    from nnterp.proof import HOLDS, prove
    from nnterp_conformance import tiny_checkpoint

    model = StandardizedTransformer(tiny_checkpoint(checkpoint), verify=False)
    proof = prove(model, withdraw=False)
    assert proof.holds, str(proof)
    titles = {value.title for value in vars(identities).values() if isinstance(value, identities.Identity)}
    held = {finding.identity for finding in proof.findings if finding.status == HOLDS}
    assert CONTRIBUTION.title in held and STREAM_CONTINUITY.title in held
    assert held - titles <= {"every_value_reads (each other value the blocks serve reads on the prompt)"}, held - titles
