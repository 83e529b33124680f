"""BERT and its renamed copies as causal LMs: post-LN blocks whose sublayers add the residual inside themselves.

Each passes the kit, skipping the contribution checks (the contributions are
unavailable: the stream is re-normalized inside the submodule that adds each
sublayer). RoBERTa's copies count positions from ``padding_idx + 1``: their family
shifts the 0-based ``position_ids`` nnsight supplies to a left-padded batch.
"""

import pytest
import torch
from nnterp import Unavailable
from nnterp_conformance.checks import verdict

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_roberta_positions_count_from_after_the_padding_index(tiny_model, monkeypatch):
    # RoBERTa numbers real tokens from padding_idx + 1: the family shifts nnsight's 0-based
    # left-padding positions, without which a padded row is a position off from its prompt alone
    model = tiny_model("roberta")
    assert verdict("padded_rows_match_alone", model, PROMPTS).status == "pass"
    monkeypatch.setattr(model, "family", model.family.replace(position_ids=None))
    assert verdict("padded_rows_match_alone", model, PROMPTS).status == "fail"


@pytest.mark.parametrize("name", ["bert", "roberta"])
def test_each_sublayer_is_added_then_normalized_inside_a_submodule(tiny_model, name):
    model = tiny_model(name)
    with pytest.raises(Unavailable, match="post-LN"):
        model.layers[0].self_attn.attention_output
    with pytest.raises(Unavailable, match="post-LN"):
        model.layers[0].mlp.mlp_output
    with torch.no_grad(), model.trace(PROMPTS):
        block = model.layers[0]
        stream = block.layer_input.save()
        attention = block.self_attn.o_proj.output.save()
        mid = block.layer_mid.save()
        neurons = block.mlp.mlp_neurons.save()
        mlp = block.mlp.down_proj.output.save()
        output = block.layer_output.save()
    native = model.layers[0]._module
    with torch.no_grad():
        torch.testing.assert_close(mid, native.attention.output.LayerNorm(stream + attention))
        torch.testing.assert_close(output, native.output.LayerNorm(mid + mlp))
        torch.testing.assert_close(mlp, native.output.dense(neurons))
    assert not torch.allclose(mid, stream + attention, atol=1e-2)
