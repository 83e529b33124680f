"""The logit lens's options (logits, the embedding row) against plain torch forward hooks on the HuggingFace modules.

Three kinds of model: llama (dense pre-norm), gemma2 (sandwich norms, scaled
embeddings, softcapped logits), mixtral (mixture of experts). The direct
computation reads the decoder layers' outputs and the first layer's input off
``register_forward_hook`` / ``register_forward_pre_hook`` on ``model._module``
and applies the final norm, ``lm_head`` and the softcap as the HF model does.
"""

import pytest
import torch
from nnterp import InvalidArgument
from nnterp.toolkit.lens import logit_lens

FAMILIES = ["llama", "gemma2", "mixtral"]
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]  # the second is left-padded
ATOL = 1e-5


@pytest.fixture(params=FAMILIES)
def model(request, tiny_model):
    return tiny_model(request.param)


def hooked(model, prompts):
    """``(embeddings, [layer outputs], logits, mask)`` from one plain HF forward, read with torch hooks; and the HF projection."""
    hf = model._module
    layers = hf.model.layers
    found = {}

    def first(value):
        return (value[0] if isinstance(value, tuple) else value).detach().clone()

    def before(module, args, kwargs):
        found.setdefault("embeddings", first(args[0] if args else kwargs["hidden_states"]))

    def after(index):
        def hook(module, args, output):  # returns None: the output goes on unchanged
            found.setdefault(index, first(output))

        return hook

    handles = [layers[0].register_forward_pre_hook(before, with_kwargs=True)]
    handles += [layer.register_forward_hook(after(index)) for index, layer in enumerate(layers)]
    encoding = model.tokenizer(prompts, padding=True, padding_side="left", return_tensors="pt")
    mask = encoding["attention_mask"]
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # each left-padded row counted from its first token
    try:
        with torch.no_grad():
            logits = hf(input_ids=encoding["input_ids"], attention_mask=mask, position_ids=position_ids).logits
    finally:
        for handle in handles:
            handle.remove()
    return found["embeddings"], [found[i] for i in range(len(layers))], logits.float(), mask.bool()


def hf_projection(model, hidden):
    """What the HF model does after its last block: final norm, lm_head, then Gemma-2's softcap where configured."""
    hf = model._module
    with torch.no_grad():
        logits = hf.lm_head(hf.model.norm(hidden))
        cap = getattr(hf.config, "final_logit_softcapping", None)
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
    return logits.float()


def real(values, mask):
    """``values`` ``[batch, rows, seq, vocab]`` at the prompts' real tokens only, ``[tokens, rows, vocab]``."""
    return values.permute(0, 2, 1, 3)[mask]


@pytest.mark.parametrize("engine", ["hooks", "nnsight"])
def test_lens_logits_and_embedding_row_match_hooked_hf_modules(model, engine):
    lens = logit_lens(model, PROMPTS, output="logits", embeddings=True, engine=engine)
    embeddings, outputs, logits, mask = hooked(model, PROMPTS)
    assert lens.shape == (2, model.num_layers + 1, mask.shape[1], model.vocab_size)
    assert lens.dtype == torch.float32 and lens.device.type == "cpu" and not lens.requires_grad
    expected = torch.stack([hf_projection(model, hidden) for hidden in [embeddings, *outputs]], dim=1)
    torch.testing.assert_close(real(lens, mask), real(expected, mask), atol=ATOL, rtol=0)
    # the last row is the model's own logits, the softcap included: bit for bit those the model computes
    torch.testing.assert_close(lens[:, -1][mask], logits[mask], atol=ATOL, rtol=0)
    with torch.no_grad(), model.trace(PROMPTS):
        traced = model.logits.save()
    torch.testing.assert_close(lens[:, -1], traced.float(), atol=0, rtol=0)


def test_gemma2s_lens_is_softcapped_and_its_embedding_row_scaled(tiny_model):
    model = tiny_model("gemma2")
    cap = model._module.config.final_logit_softcapping
    assert cap is not None
    lens = logit_lens(model, PROMPTS, output="logits", embeddings=True)
    assert lens.abs().max() <= cap  # tanh bounds every row, not just the last
    embeddings, _, _, mask = hooked(model, PROMPTS)
    ids = model.tokenizer(PROMPTS, padding=True, padding_side="left", return_tensors="pt")["input_ids"]
    weight = model._module.model.embed_tokens.weight
    # block 0 reads the embedding rows times sqrt(hidden_size), the stream the model carries
    torch.testing.assert_close(embeddings[mask], (weight[ids] * model.hidden_size**0.5)[mask], atol=ATOL, rtol=0)
    torch.testing.assert_close(lens[:, 0][mask], hf_projection(model, embeddings)[mask], atol=ATOL, rtol=0)


def test_softmax_of_the_logits_is_the_probabilities_and_the_rows_are_the_plain_lens(model):
    logits = logit_lens(model, PROMPTS, output="logits", embeddings=True)
    probs = logit_lens(model, PROMPTS, embeddings=True)
    torch.testing.assert_close(probs, logits.softmax(-1), atol=0, rtol=0)
    plain = logit_lens(model, PROMPTS)
    torch.testing.assert_close(probs[:, 1:], plain, atol=0, rtol=0)
    # positions select from every row, the embedding row included; an int drops the seq axis
    # (fewer rows go through lm_head's matmul, which may round otherwise: ATOL)
    last = logit_lens(model, PROMPTS, output="logits", embeddings=True, positions=-1)
    assert last.shape == (2, model.num_layers + 1, model.vocab_size)
    torch.testing.assert_close(last, logits[:, :, -1], atol=ATOL, rtol=0)
    some = logit_lens(model, PROMPTS, output="logits", embeddings=True, positions=[0, -1])
    own = len(model.tokenizer(PROMPTS[1])["input_ids"])  # the left-padded prompt's position 0 is its own first token
    torch.testing.assert_close(some[1], logits[1][:, [-own, -1]], atol=ATOL, rtol=0)


def test_inverse_follows_output_and_embeddings(model):
    logits, inverse = logit_lens(model, PROMPTS, output="logits", embeddings=True, inverse=True)
    embeddings, outputs, _, mask = hooked(model, PROMPTS)
    expected = torch.stack([hf_projection(model, -hidden) for hidden in [embeddings, *outputs]], dim=1)
    assert inverse.shape == logits.shape
    torch.testing.assert_close(real(inverse, mask), real(expected, mask), atol=ATOL, rtol=0)
    probs, inverse_probs = logit_lens(model, PROMPTS, embeddings=True, inverse=True)
    torch.testing.assert_close(inverse_probs, inverse.softmax(-1), atol=0, rtol=0)


def test_hooks_and_trace_agree_bit_for_bit(model):
    hooks = logit_lens(model, PROMPTS, output="logits", embeddings=True, engine="hooks")
    traced = logit_lens(model, PROMPTS, output="logits", embeddings=True, engine="nnsight")
    torch.testing.assert_close(hooks, traced, atol=0, rtol=0)


def test_bad_output_and_embeddings_are_refused_before_the_model_runs(tiny_model):
    model = tiny_model("llama")
    with pytest.raises(InvalidArgument, match=r"logit_lens\(output='logit'\).*'probs'.*'logits'"):
        logit_lens(model, PROMPTS, output="logit")
    with pytest.raises(InvalidArgument, match=r"logit_lens\(embeddings=1\)"):
        logit_lens(model, PROMPTS, embeddings=1)
