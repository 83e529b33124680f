"""The tuned lens (nnterp.toolkit.tuned_lens): training lowers the held-out KL, the identity is the logit lens, save/load, refusals, and a direct computation.

Three kinds of model: llama (dense pre-norm), gemma2 (sandwich norms, softcapped
logits), mixtral (mixture of experts). The direct computation reads the HF
decoder layers' outputs off torch forward hooks on ``model._module``, applies
each translator by hand, then the final norm, ``lm_head`` and the softcap.
"""

import random

import pytest
import torch
from nnterp import InvalidArgument
from nnterp.toolkit.lens import logit_lens
from nnterp.toolkit.tuned_lens import TunedLens, tuned_lens

FAMILIES = ["llama", "gemma2", "mixtral"]
WORDS = (
    "the quick brown fox jumps over lazy dog hello world there Eiffel Tower is in Paris Colosseum Rome def add "
    "return residual stream attention patterns and neurons 0 1 2 3 4 5 6 7 8 9 ; , . !"
).split()
_draw = random.Random(0)
TEXTS = [" ".join(_draw.choice(WORDS) for _ in range(_draw.randint(6, 14))) for _ in range(48)]
TRAIN, HELD_OUT = TEXTS[:40], TEXTS[40:]  # one distribution, texts the training never sees
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
ATOL = 1e-5


@pytest.fixture(params=FAMILIES)
def model(request, tiny_model):
    return tiny_model(request.param)


def real_mask(model, prompts):
    return model.tokenizer(prompts, padding=True, padding_side="left", return_tensors="pt")["attention_mask"].bool()


def held_out_kl(model, lens):
    """Each row's KL(final || lens), averaged over the held-out texts' real tokens, ``[num_layers + 1]`` (the last is 0)."""
    logp = tuned_lens(model, HELD_OUT, lens, output="logits", embeddings=True).log_softmax(-1)
    final = logp[:, -1:]
    kl = (final.exp() * (final - logp)).sum(-1)  # [batch, rows, seq]
    return kl.permute(0, 2, 1)[real_mask(model, HELD_OUT)].mean(0)


def test_training_lowers_the_held_out_kl_from_the_identity(model):
    lens = TunedLens.train(model, TRAIN, steps=30, lr=3e-3, batch_size=8, progress=False)
    before, after = held_out_kl(model, TunedLens.identity(model)), held_out_kl(model, lens)
    assert before[-1] == after[-1] == 0  # the last row is the model's own prediction
    assert (before[:-1] > 0).all()
    assert (after[:-1] < before[:-1]).all(), (before, after)
    assert len(lens.history) == 30 and lens.history[-1] < lens.history[0]
    # the last block's translator is never trained: it stays the identity
    assert not lens.weight[-1].any() and not lens.bias[-1].any()
    assert lens.weight[:-1].any()


def test_the_untrained_lens_is_the_logit_lens_exactly(model):
    identity = TunedLens.identity(model)
    for output in ("probs", "logits"):
        for embeddings in (False, True):
            expected = logit_lens(model, PROMPTS, output=output, embeddings=embeddings)
            got = tuned_lens(model, PROMPTS, identity, output=output, embeddings=embeddings)
            torch.testing.assert_close(got, expected, atol=0, rtol=0)
    torch.testing.assert_close(tuned_lens(model, PROMPTS, identity, positions=-1), logit_lens(model, PROMPTS, positions=-1), atol=0, rtol=0)


def hooked_outputs(model, prompts):
    """Block 0's input and every decoder layer's output, from torch hooks on the HF modules around a plain forward."""
    layers = model._module.model.layers
    found = {}

    def first(value):
        return (value[0] if isinstance(value, tuple) else value).detach().clone()

    def before(_module, args, kwargs):
        found.setdefault(-1, first(args[0] if args else kwargs["hidden_states"]))

    def after(index):
        def hook(_module, _args, out):
            found.setdefault(index, first(out))

        return hook

    handles = [layers[0].register_forward_pre_hook(before, with_kwargs=True)]
    handles += [layer.register_forward_hook(after(index)) for index, layer in enumerate(layers)]
    encoding = model.tokenizer(prompts, padding=True, padding_side="left", return_tensors="pt")
    position_ids = (encoding["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    try:
        with torch.no_grad():
            model._module(input_ids=encoding["input_ids"], attention_mask=encoding["attention_mask"], position_ids=position_ids)
    finally:
        for handle in handles:
            handle.remove()
    return [found[i] for i in range(-1, len(layers))]


def test_the_lens_is_its_translators_then_the_hf_unembedding(model):
    torch.manual_seed(0)
    lens = TunedLens.identity(model)
    lens.weight[:-1] = 0.05 * torch.randn_like(lens.weight[:-1])
    lens.bias[:-1] = 0.05 * torch.randn_like(lens.bias[:-1])
    got = tuned_lens(model, PROMPTS, lens, output="logits", embeddings=True)
    hf = model._module
    cap = getattr(hf.config, "final_logit_softcapping", None)
    expected = []
    with torch.no_grad():
        for row, hidden in enumerate(hooked_outputs(model, PROMPTS)):
            translated = hidden + hidden @ lens.weight[row].T + lens.bias[row]
            logits = hf.lm_head(hf.model.norm(translated))
            expected.append(torch.tanh(logits / cap) * cap if cap is not None else logits)
    expected = torch.stack(expected, dim=1).float()
    mask = real_mask(model, PROMPTS)
    torch.testing.assert_close(got.permute(0, 2, 1, 3)[mask], expected.permute(0, 2, 1, 3)[mask], atol=ATOL, rtol=0)
    # the translators run the same inside a trace
    traced = tuned_lens(model, PROMPTS, lens, output="logits", embeddings=True, engine="nnsight")
    torch.testing.assert_close(traced, got, atol=0, rtol=0)
    # without the embedding row the rows are the blocks', and the probabilities their softmax
    blocks = tuned_lens(model, PROMPTS, lens)
    torch.testing.assert_close(blocks, got[:, 1:].softmax(-1), atol=0, rtol=0)
    assert not torch.allclose(got[:, :-1], logit_lens(model, PROMPTS, output="logits", embeddings=True)[:, :-1])


def test_save_and_load_round_trip_exactly(tiny_model, tmp_path):
    model = tiny_model("llama")
    lens = TunedLens.train(model, TRAIN, steps=3, batch_size=16, progress=False)
    folder = lens.save(tmp_path / "lens")
    assert sorted(path.name for path in folder.iterdir()) == ["config.json", "params.safetensors"]
    loaded = TunedLens.load(folder, model)
    assert torch.equal(loaded.weight, lens.weight) and torch.equal(loaded.bias, lens.bias)
    assert (loaded.history, loaded.settings) == (lens.history, lens.settings)
    assert (loaded.model, loaded.model_class, loaded.hidden_size, loaded.num_layers) == (lens.model, lens.model_class, lens.hidden_size, lens.num_layers)
    torch.testing.assert_close(tuned_lens(model, PROMPTS, loaded), tuned_lens(model, PROMPTS, lens), atol=0, rtol=0)


def test_a_lens_is_refused_on_another_model(tiny_model, tmp_path):
    llama, gemma2, mixtral = (tiny_model(name) for name in ("llama", "gemma2", "mixtral"))
    assert llama.num_layers != gemma2.num_layers
    TunedLens.identity(llama).save(tmp_path / "llama")
    with pytest.raises(InvalidArgument, match=r"TunedLens.load\(model=.*num_layers=3.*num_layers=2.*train a lens on this model"):
        TunedLens.load(tmp_path / "llama", gemma2)
    with pytest.raises(InvalidArgument, match=r"TunedLens.load\(model=.*num_layers"):
        TunedLens.load(tmp_path / "llama", gemma2, strict=False)  # other sizes never fit
    with pytest.raises(InvalidArgument, match=r"tuned_lens\(lens=.*num_layers"):
        tuned_lens(gemma2, PROMPTS, TunedLens.identity(llama))
    # the same sizes, another model: refused by name and class unless strict=False
    assert (gemma2.hidden_size, gemma2.num_layers) == (mixtral.hidden_size, mixtral.num_layers)
    TunedLens.identity(gemma2).save(tmp_path / "gemma2")
    with pytest.raises(InvalidArgument, match=r"TunedLens.load\(model=.*Gemma2ForCausalLM.*MixtralForCausalLM.*strict=False"):
        TunedLens.load(tmp_path / "gemma2", mixtral)
    assert TunedLens.load(tmp_path / "gemma2", mixtral, strict=False).num_layers == mixtral.num_layers
    with pytest.raises(InvalidArgument, match=r"TunedLens.load\(directory=.*config.json"):
        TunedLens.load(tmp_path / "nothing", llama)


def test_bad_training_arguments_are_refused(tiny_model):
    model = tiny_model("llama")
    with pytest.raises(InvalidArgument, match=r"TunedLens.train\(steps=0\)"):
        TunedLens.train(model, TRAIN, steps=0)
    with pytest.raises(InvalidArgument, match=r"TunedLens.train\(lr=-1\).*lr=1e-3"):
        TunedLens.train(model, TRAIN, lr=-1)
    with pytest.raises(InvalidArgument, match=r"TunedLens.train\(texts=\[\]\)"):
        TunedLens.train(model, [])
    with pytest.raises(InvalidArgument, match=r"tuned_lens\(lens=.*TunedLens.train"):
        tuned_lens(model, PROMPTS, "lens")
    with pytest.raises(InvalidArgument, match=r"tuned_lens\(output='prob'\)"):
        tuned_lens(model, PROMPTS, TunedLens.identity(model), output="prob")
