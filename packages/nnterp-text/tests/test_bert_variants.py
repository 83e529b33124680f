"""The remaining BERT-style causal LMs: X-MOD (post-LN, a language adapter) and the pre-LN copies.

X-MOD skips the contribution checks, as BERT does. RoBERTa-PreLayerNorm,
XLM-RoBERTa-XL and Megatron-BERT normalize before each sublayer and add
``dense``'s output straight to the stream: their contributions are served and
every check runs. Pointing a contribution at the sublayer module's output
(which includes the residual) breaks the identity, and the kit names the block.
"""

import pytest
from nnterp_conformance.checks import verdict
from nnterp_conformance.runner import run

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
PRE_LN = ["roberta-prelayernorm", "xlm-roberta-xl", "megatron-bert"]


def test_xmod_skips_name_their_reasons(tiny_model):
    skipped = {v.name: str(v) for v in run(tiny_model("xmod"), PROMPTS) if v.status == "skip"}
    assert "post-LN" in skipped["mid_stream"]
    assert "language adapter" in skipped["contribution"]


@pytest.mark.parametrize("name", PRE_LN)
def test_a_contribution_read_with_the_residual_fails_naming_the_block(tiny_model, name, monkeypatch):
    # attention.output returns layer_input + dense(context): that is a stream, not what the block adds
    model = tiny_model(name)
    assert verdict("contribution", model, PROMPTS).status == "pass"
    attention = type(model.layers[0].self_attn)
    broken = attention.attention_output.at("E_output.output", select=None)
    broken.__set_name__(attention, "attention_output")
    monkeypatch.setattr(attention, "attention_output", broken)
    failed = verdict("contribution", model, PROMPTS)
    assert failed.status == "fail"
    assert "layers[" in str(failed)
