"""The induction-head tutorial's findings hold: its code trains the model, and each finding is checked against plain torch on the HF model."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "examples" / "induction_head" / "induction.py"
ATOL = 1e-4


def load_tutorial():
    spec = importlib.util.spec_from_file_location("induction_tutorial", MODULE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """The module, the trained model's folder, the model through nnterp and the findings: trained once for the file."""
    module = load_tutorial()
    path = tmp_path_factory.mktemp("induction")
    model, findings = module.run(path, progress=False)
    return module, path, model, findings


@pytest.fixture(scope="module")
def hf_model(tutorial):
    """The same checkpoint loaded by transformers alone, for direct computations."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tutorial[1], attn_implementation="eager").eval()


def prompt_ids(tutorial):
    module, _, model, findings = tutorial
    return torch.tensor(model.tokenizer(findings.prompts)["input_ids"])


def test_training_makes_the_repeat_predictable_and_only_the_repeat(tutorial):
    module, _, _, findings = tutorial
    first, second = module.half_losses(findings.losses)
    # the first occurrences stay at chance; the repeat falls far below it
    assert first > 0.9 * module.CHANCE
    assert second < first / 20
    log = findings.training
    assert sum(log.second[-20:]) < sum(log.first[-20:]) / 20


def test_losses_are_the_hf_models_cross_entropy(tutorial, hf_model):
    module, _, _, findings = tutorial
    ids = prompt_ids(tutorial)
    with torch.no_grad():
        logits = hf_model(ids).logits[:, :-1]
    direct = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none").mean(0)
    torch.testing.assert_close(findings.losses, direct, atol=ATOL, rtol=0)


def test_the_logit_lens_predicts_the_repeat_only_at_the_last_layer(tutorial, hf_model):
    module, _, _, findings = tutorial
    ids = prompt_ids(tutorial)[:1]
    with torch.no_grad():
        probs = hf_model(ids).logits[0].softmax(-1)
    # the last layer's lens is the model's own prediction
    torch.testing.assert_close(findings.lens[-1], probs, atol=ATOL, rtol=0)
    first, last = findings.lens_repeat[0], findings.lens_repeat[-1]
    assert last > 0.5
    assert first < last / 10


def test_head_scores_are_read_off_the_hf_attention_weights(tutorial, hf_model):
    module, _, _, findings = tutorial
    with torch.no_grad():
        attentions = hf_model(prompt_ids(tutorial), output_attentions=True).attentions
    half = module.HALF
    queries = torch.arange(half + 1, 2 * half + 1)
    induction = torch.stack([a[:, :, queries, queries - half + 1].mean((0, 2)) for a in attentions])
    queries = torch.arange(2, module.LENGTH)
    previous = torch.stack([a[:, :, queries, queries - 1].mean((0, 2)) for a in attentions])
    torch.testing.assert_close(findings.induction, induction, atol=ATOL, rtol=0)
    torch.testing.assert_close(findings.previous, previous, atol=ATOL, rtol=0)


def test_the_top_induction_score_is_the_top_patched_head_and_the_previous_token_head_is_in_layer_0(tutorial):
    _, _, _, findings = tutorial
    assert findings.patching_head == findings.induction_head
    assert findings.induction_head[0] == 1
    assert findings.previous_head[0] == 0
    # patching the induction head alone restores most of the clean metric
    assert findings.patching.values[findings.induction_head] > 0.5


def test_attribution_patching_agrees_on_the_head(tutorial):
    module, _, _, findings = tutorial
    assert findings.attribution_head == findings.induction_head


def test_zeroing_the_induction_head_breaks_copying(tutorial, hf_model):
    module, _, _, findings = tutorial
    clean, ablated, control = (module.half_losses(loss)[1] for loss in (findings.losses, findings.ablated, findings.control))
    assert ablated > 20 * clean
    assert ablated > module.CHANCE / 2
    assert control < 2 * clean + 0.01
    # the ablation is the HF model with that head's slice of o_proj's input zeroed
    layer, head = findings.induction_head
    attention = hf_model.model.layers[layer].self_attn
    width = attention.head_dim

    def zero(_, args):
        joined = args[0].clone()
        joined[..., head * width : (head + 1) * width] = 0
        return (joined,)

    ids = prompt_ids(tutorial)
    hook = attention.o_proj.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            logits = hf_model(ids).logits[:, :-1]
    finally:
        hook.remove()
    direct = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none").mean(0)
    torch.testing.assert_close(findings.ablated, direct, atol=ATOL, rtol=0)


def test_the_previous_token_head_acts_through_the_induction_heads_key(tutorial, hf_model):
    module, _, model, findings = tutorial
    (lp, hp), (li, hi) = findings.previous_head, findings.induction_head
    total = float(findings.patching.values[lp, hp])
    key = float(findings.paths["key"].values[0, hp])
    assert abs(total) > 0.2  # the previous-token head matters
    assert key / total > 0.8  # and its path into the induction head's key carries most of that
    for name in ("query", "value", "other keys", "logits"):
        assert abs(float(findings.paths[name].values[0, hp])) < 0.1 * abs(total), name
    # the key path is the three runs done with plain torch hooks on the HF model
    metric = module.repeat_logprob(model, findings.prompts)
    clean_ids = prompt_ids(tutorial)
    corrupted_ids = torch.tensor(model.tokenizer(findings.corrupted)["input_ids"])
    layers = hf_model.model.layers
    width = layers[lp].self_attn.head_dim
    sender, receiver = slice(hp * width, (hp + 1) * width), slice(hi * width, (hi + 1) * width)

    def run(ids, forward_hooks=(), pre_hooks=()):
        handles = [m.register_forward_hook(h) for m, h in forward_hooks] + [m.register_forward_pre_hook(h) for m, h in pre_hooks]
        try:
            with torch.no_grad():
                return float(metric(hf_model(ids).logits))
        finally:
            for handle in handles:
                handle.remove()

    kept = {}
    first = lambda output: output[0] if isinstance(output, tuple) else output  # noqa: E731
    parts = [(j, name) for j in range(len(layers)) for name in ("self_attn", "mlp")]
    clean = run(clean_ids, pre_hooks=[(layers[lp].self_attn.o_proj, lambda _, args: kept.__setitem__("z", args[0].clone()))])
    keep = [(getattr(layers[j], name), lambda _, __, out, key=(j, name): kept.__setitem__(key, first(out).clone())) for j, name in parts]
    corrupted = run(corrupted_ids, keep)

    def send(_, args):
        z = args[0].clone()
        z[..., sender] = kept["z"][..., sender]
        return (z,)

    def freeze(_, __, out, key):
        return (kept[key], *out[1:]) if isinstance(out, tuple) else kept[key]

    frozen = [(getattr(layers[j], name), lambda m, a, o, key=(j, name): freeze(m, a, o, key)) for j, name in parts if j > lp or name == "mlp"]
    record = [(layers[li].self_attn.k_proj, lambda _, __, out: kept.__setitem__("k", out.clone()))]
    run(corrupted_ids, frozen + record, [(layers[lp].self_attn.o_proj, send)])

    def receive(_, __, out):
        out = out.clone()
        out[..., receiver] = kept["k"][..., receiver]  # before the rotary embedding, which then rotates it as the model does
        return out

    patched = run(corrupted_ids, [(layers[li].self_attn.k_proj, receive)])
    assert key == pytest.approx((patched - corrupted) / (clean - corrupted), abs=ATOL)


def test_the_figures_are_drawn_by_the_tutorials_code(tutorial, tmp_path):
    module, _, model, findings = tutorial
    paths = module.draw(model, findings, tmp_path)
    assert len(paths) >= 8
    for path in paths:
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path


def test_the_page_is_current_with_the_code_and_shows_figures_that_exist():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "tutorial_page.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
