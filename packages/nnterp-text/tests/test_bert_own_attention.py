"""RoFormer, RemBERT and BigBird (full attention): BERT's post-LN block with an ``attention.self`` of its own arithmetic.

Each skips exactly the contribution checks, as BERT does (the stream is
re-normalized inside the submodule that adds each sublayer). The interior is
read at ``attention.self``'s own operations; the tests below tie it to the
arithmetic: the scores are the queries times the keys (RoFormer's after the
rotary embedding), the head outputs the pattern times the values.

RoFormer's rotary table is a frozen ``nn.Embedding`` weight, which the tiny
checkpoint's writer leaves as the model defines it: a noised table would be no
rotation, and a left-padded row (RoFormer takes no ``position_ids``) would no
longer match its prompt alone.
"""

import math

import pytest
import torch
from nnterp import TinyConfig, Unavailable
from nnterp_conformance.checks import verdict

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
NAMES = ["big_bird", "rembert", "roformer"]


def test_roformer_keeps_its_rotary_table_and_so_its_padded_rows(tiny_model):
    # the writer noises trainable parameters only: the frozen sinusoidal table is the model's own
    model = tiny_model("roformer")
    assert verdict("padded_rows_match_alone", model, PROMPTS).status == "pass"  # loads the real weights too
    table = model._module.roformer.encoder.embed_positions
    assert torch.equal(table.weight, table.create_weight())


@pytest.mark.parametrize("name", NAMES)
def test_interior_is_the_attention_arithmetic(tiny_model, name):
    # one prompt, no padding: the mask is zero on and below the diagonal
    model = tiny_model(name)
    with torch.no_grad(), model.trace(PROMPTS[0]):
        attention = model.layers[1].self_attn
        # in the order the forward computes them
        keys = attention.attention_keys.save()
        queries = attention.attention_queries.save()
        scores = attention.attention_scores.save()
        pattern = attention.attention_probabilities.save()
        values = attention.attention_values.save()
        heads = attention.attention_head_outputs.save()
    seq = queries.shape[2]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    products = queries @ keys.transpose(-1, -2) / math.sqrt(queries.shape[-1])
    torch.testing.assert_close(scores[..., causal], products[..., causal])
    torch.testing.assert_close(pattern, scores.softmax(-1))
    torch.testing.assert_close(heads, (pattern @ values).transpose(1, 2))


def test_roformer_queries_and_keys_are_rotated(tiny_model):
    # the scores are made from the projections after the rotary embedding, and so are the queries and keys served
    model = tiny_model("roformer")
    with torch.no_grad(), model.trace(PROMPTS[0]):
        stream = model.layers[0].layer_input.save()
        keys = model.layers[0].self_attn.attention_keys.save()
        queries = model.layers[0].self_attn.attention_queries.save()
    native = model._module
    attention = native.roformer.encoder.layer[0].attention.self
    batch, seq, _ = stream.shape
    with torch.no_grad():
        positions = native.roformer.encoder.embed_positions((batch, seq))[None, None]
        heads = (batch, seq, queries.shape[1], -1)
        unrotated = [proj(stream).view(heads).transpose(1, 2) for proj in (attention.query, attention.key)]
        rotated = attention.apply_rotary_position_embeddings(positions, *unrotated)
    torch.testing.assert_close(queries, rotated[0])
    torch.testing.assert_close(keys, rotated[1])
    assert not torch.allclose(queries, unrotated[0], atol=1e-3)
    assert not torch.allclose(keys, unrotated[1], atol=1e-3)


def test_rembert_projects_its_narrower_embeddings_into_the_stream(tiny_model):
    model = tiny_model("rembert")
    config = model._module.config
    assert config.input_embedding_size != config.hidden_size
    with torch.no_grad(), model.trace(PROMPTS[0]):
        tokens = model.embed_tokens.output.save()
        projected = model.rembert.encoder.embedding_hidden_mapping_in.output.save()
        stream = model.layers[0].layer_input.save()
    assert tokens.shape[-1] == config.input_embedding_size
    torch.testing.assert_close(stream, projected)


@pytest.mark.parametrize("name", NAMES)
def test_contributions_are_unavailable_as_post_ln(tiny_model, name):
    model = tiny_model(name)
    with pytest.raises(Unavailable, match="post-LN"):
        model.layers[0].self_attn.attention_output
    with pytest.raises(Unavailable, match="post-LN"):
        model.layers[0].mlp.mlp_output


def test_block_sparse_big_bird_has_no_interior(tmp_path):
    from nnterp import StandardizedTransformer
    from nnterp_conformance.checkpoints import write_checkpoint

    write_checkpoint(TinyConfig("big_bird", {"is_decoder": True, "block_size": 4, "num_random_blocks": 1}), tmp_path)
    model = StandardizedTransformer(tmp_path, attn_implementation="eager")
    support = model.support()
    for value in ("queries", "keys", "values", "scores", "probabilities", "head_outputs"):
        assert "block_sparse" in support[f"self_attn.attention_{value}"][0]
    with pytest.raises(Unavailable, match="block_sparse"):
        model.layers[0].self_attn.attention_probabilities
