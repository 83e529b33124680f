"""Several residual streams per token (DeepSeek-V4, HY-V4): the stream values' shapes, the logit lens, and the
projection through the model's own collapse of the streams."""

import pytest
import torch
from nnterp import Unavailable
from nnterp.layouts import STREAMS, axis_size
from nnterp.toolkit.lens import logit_lens

PROMPTS = ["The quick brown fox", "Hello"]


@pytest.mark.parametrize("checkpoint", ["deepseek_v4", "hy_v4"])
def test_stream_values_have_their_layouts(tiny_model, checkpoint):
    model = tiny_model(checkpoint)
    block = model.layers[1]
    streams = axis_size(block, STREAMS)
    assert streams == model._module.config.hc_mult > 1
    with torch.no_grad(), model.trace(PROMPTS):
        entering = block.layer_input.save()
        weights = block.attention_collapse_weights.save()
        spread = block.attention_spread_weights.save()
        collapsed = block.attention_collapsed.save()
        leaving = block.layer_output.save()
    batch, seq = entering.shape[:2]
    assert entering.shape == leaving.shape == (batch, seq, streams, model.hidden_size)
    assert weights.shape == spread.shape == (batch, seq, streams)
    assert collapsed.shape == (batch, seq, model.hidden_size)
    # the sublayer reads the streams collapsed by its weights (the kit's sublayers_read_the_collapse, on one block)
    torch.testing.assert_close(collapsed, (weights.unsqueeze(-1) * entering).sum(2))


def test_unmixed_streams_say_why(tiny_model):
    block = tiny_model("hy_v4").layers[0]
    with pytest.raises(Unavailable, match="unmixed"):
        block.attention_stream_mixing
    assert "unmixed" in block.support()["mlp_stream_mixing"]


@pytest.mark.parametrize("checkpoint", ["deepseek_v4", "hy_v4"])
def test_logit_lens_collapses_the_streams_as_the_model_does(tiny_model, checkpoint):
    model = tiny_model(checkpoint)
    lens = logit_lens(model, PROMPTS)
    assert lens.shape[:2] == (len(PROMPTS), model.num_layers) and lens.shape[-1] == model.vocab_size
    with torch.no_grad(), model.trace(PROMPTS):
        streams = model.layers[0].layer_output.save()
        logits = model.logits.save()
    # the last layer's lens is the model's own distribution
    torch.testing.assert_close(lens[:, -1], logits.float().softmax(-1))
    # an earlier layer's is lm_head(norm(hc_head(streams))), with the model's own modules
    inner = model._module.model
    expected = model._module.lm_head(inner.norm(inner.hc_head(streams))).float().softmax(-1)
    torch.testing.assert_close(lens[:, 0], expected)
    # a position given as an int drops the seq axis and keeps the streams whole until they are collapsed
    last = logit_lens(model, PROMPTS, positions=-1)
    assert last.shape == (len(PROMPTS), model.num_layers, model.vocab_size)
    torch.testing.assert_close(last, lens[:, :, -1])
