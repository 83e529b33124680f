"""Kolibri-1.1 (5.25): Kolibri-1's block with sparse indexed attention, a pool of keys carried from block to block,
and keys and values one block computes and a later one reads.

The tiny checkpoint's selection bites (five keys a query on the kit's longer
prompt), so the kit's pattern checks hold on a sparse pattern; a wrong read of
the keys (before the NVFP4 rounding the interface is handed) is killed.
"""

import torch
from nnterp import Glm4Attention
from nnterp_conformance.mutants import Mutant, killed, moved

from nnterp_text.families.kolibri1_1 import KV_STORED

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_the_indexed_blocks_attend_to_the_selected_keys_alone(tiny_model):
    model = tiny_model("kolibri1_1")
    config = model._module.config
    budget = config.index_topk + config.index_num_local_tokens + config.index_num_sink_tokens
    with torch.no_grad(), model.trace(PROMPTS[0]):
        indexer_keys = model.layers[1].self_attn.attention_keys.detach().clone().save()
        indexer = model.layers[1].self_attn.attention_probabilities.detach().clone().save()
        reindexer_keys = model.layers[3].self_attn.attention_keys.detach().clone().save()
        reindexer = model.layers[3].self_attn.attention_probabilities.detach().clone().save()
    seq = indexer.shape[-1]
    assert seq > budget  # the prompt is long enough for the selection to drop keys
    for pattern in (indexer, reindexer):
        kept = (pattern > 0).sum(-1)
        assert kept.max() == budget and (kept[..., budget:] == budget).all()
    # the reindexer reads the indexer's keys (kv_source_layers), rounded alike
    assert config.kv_source_layers[3] == 1
    torch.testing.assert_close(reindexer_keys, indexer_keys, rtol=0, atol=0)


def test_the_block_storing_shared_keys_says_skipping_it_breaks_the_reader(tiny_model):
    model = tiny_model("kolibri1_1")
    assert [block.skip_breaks() for block in model.layers] == [None, KV_STORED, None, None]
    assert model.layers[1].read_beside_the_stream() is not None
    # a skipped sliding block between the indexer and the reindexer hands on the indexer's pool: the reindexer runs
    with torch.no_grad(), model.trace(PROMPTS[0]):
        model.layers[2].skip(model.layers[2].layer_input)
        logits = model.logits.save()
    assert torch.isfinite(logits).all()


def test_keys_read_before_their_rounding_are_killed():
    unrounded = moved(Glm4Attention, "keys before the rounding",
                      attention_keys=Glm4Attention.attention_keys.at("source.nvfp4_fake_quantize_0.inputs", select=0))
    # on the indexed blocks, the only ones that round
    mutant = Mutant(
        "kolibri1_1: keys read before the NVFP4 rounding", "kolibri1_1",
        {"layers.1.self_attn": unrounded, "layers.3.self_attn": unrounded},
        "scores_are_queries_against_keys", "queries @ keys^T", "the keys read before the NVFP4 rounding the interface is handed",
    )
    found = killed(mutant)
    assert found.status == "fail" and "queries @ keys^T" in found.detail, found
