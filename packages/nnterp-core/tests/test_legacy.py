"""nnterp 1.3's names (nnterp.legacy, nnterp.interventions, nnterp.prompt_utils): each is its standard replacement, and warns once.

The accessors read and write the tensor their replacement does on llama
(pre-norm), gemma2 (sandwich norms) and mixtral (mixture of experts); on bloom
(whose modules add the residual) and gemma2 the shims serve the standard
contribution, not the module output 1.3 served, which plain torch hooks on the
HuggingFace modules read. 1.3's README, run unchanged, prints what its
standard translation prints, with one warning per name.
"""

import collections
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from nnterp import StandardizedTransformer, legacy
from nnterp.interventions import TargetPrompt, logit_lens, patch_object_attn_lens, patchscope_generate, patchscope_lens
from nnterp.toolkit import lens

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "nnterp13"
PROMPT = "The Eiffel Tower is in Paris"
ATOL = 1e-5

#: 1.3 accessor -> (standard path on layers[i]) for the values that can be written
VALUES = {
    "layers_input": "layer_input",
    "attentions_input": "attention_norm_output",
    "attention_probabilities": "self_attn.attention_probabilities",
    "attentions_output": "self_attn.attention_output",
    "mlps_input": "mlp_input",
    "mlps_output": "mlp.mlp_output",
    "layers_output": "layer_output",
}


@pytest.fixture(autouse=True)
def fresh_warnings():
    legacy._warned.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", legacy.LegacyName)
        yield
    legacy._warned.clear()


def standard(model, layer, path):
    value = model.layers[layer]
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("family", ["llama", "gemma2", "mixtral"])
def test_accessors_read_and_write_their_replacement(tiny_model, family):
    model = tiny_model(family)
    layer = 1
    with torch.no_grad(), model.trace(PROMPT):
        clean = model.logits.save()
    for name, path in VALUES.items():
        with torch.no_grad(), model.trace(PROMPT):
            old = getattr(model, name)[layer].clone().save()
            new = standard(model, layer, path).save()
        assert torch.equal(old, new), name
        scaled = {}
        for spelling in ("legacy", "standard"):
            with torch.no_grad(), model.trace(PROMPT):
                value = standard(model, layer, path)
                if spelling == "legacy":
                    getattr(model, name)[layer] = value * 0.5 + 0.1
                else:
                    owner, _, last = path.rpartition(".")
                    setattr(standard(model, layer, owner) if owner else model.layers[layer], last, value * 0.5 + 0.1)
                scaled[spelling] = model.logits.save()
        assert torch.equal(scaled["legacy"], scaled["standard"]), name
        assert not torch.allclose(scaled["legacy"], clean, atol=ATOL), name
    with torch.no_grad(), model.trace(PROMPT):
        embeddings = model.token_embeddings.save()
        direct = model.embed_tokens.output.save()
        probs = model.next_token_probs.save()
        logits = model.logits.save()
    assert torch.equal(embeddings, direct)
    assert model.ln_final._module is model.norm._module
    assert torch.allclose(probs, logits[:, -1].softmax(-1))
    assert model.attentions[layer]._module is model.layers[layer].self_attn._module
    assert model.mlps[layer]._module is model.layers[layer].mlp._module
    with pytest.raises(TypeError, match="is a module"):
        model.mlps[layer] = None


@pytest.mark.parametrize("family, attention_module", [("bloom", "self_attention"), ("dbrx", "norm_attn_norm"), ("gemma2", "self_attn")])
def test_where_the_meaning_changed_the_shim_serves_the_contribution(tiny_model, family, attention_module):
    # 1.3 served the module it renamed self_attn: bloom's attention adds the residual, dbrx's norm_attn_norm holds the
    # add too, gemma2's attention comes before the post-norm
    model = tiny_model(family)
    layer = 1
    with torch.no_grad(), model.trace(PROMPT):
        stream = model.layers[layer].layer_input.save()
        shim = model.attentions_output[layer].save()
        middle = model.layers[layer].layer_mid.save()
    # the module 1.3 renamed to self_attn, read by a plain torch hook on a plain forward (the weights are in after the trace)
    seen = {}

    def hook(module, args, output):
        seen["module"] = output[0].detach().clone()

    handle = getattr(model.layers[layer]._module, attention_module).register_forward_hook(hook)
    try:
        with torch.no_grad():
            model._module(**model.tokenizer(PROMPT, return_tensors="pt"))
    finally:
        handle.remove()
    assert torch.allclose(stream + shim, middle, atol=ATOL)  # the contribution: what the block adds
    assert not torch.allclose(seen["module"], shim, atol=1e-3)  # not what 1.3 served
    if family in ("bloom", "dbrx"):
        assert torch.allclose(seen["module"], middle, atol=ATOL)  # 1.3's value was the stream after the add
    else:
        norm = model.layers[layer].post_attention_layernorm._module
        assert torch.allclose(norm(seen["module"]), shim, atol=ATOL)  # the standard value is after the post-norm


def test_each_name_warns_once_naming_its_replacement(tiny_model):
    model = tiny_model("llama")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with torch.no_grad(), model.trace(PROMPT):
                model.layers_output[0].save()
                model.attentions_output[1].save()
    names = collections.Counter(str(w.message).split(" ")[0] for w in caught if issubclass(w.category, legacy.LegacyName))
    assert names == {"model.layers_output": 1, "model.attentions_output": 1}
    message = next(str(w.message) for w in caught if "attentions_output" in str(w.message))
    assert "model.layers[i].self_attn.attention_output" in message and "BLOOM" in message
    assert issubclass(legacy.LegacyName, FutureWarning)  # shown by default, outside __main__ too


def test_spellings_of_steer_skip_and_the_constructor(tiny_model):
    model = tiny_model("llama")
    vector = torch.randn(model.hidden_size)
    runs = {}
    for spelling in ("legacy", "standard"):
        with torch.no_grad(), model.trace(PROMPT):
            if spelling == "legacy":
                model.steer(layers=1, steering_vector=vector, factor=2.0, positions=-1)
                model.skip_layer(2)
            else:
                model.steer(1, vector, 2.0, token_positions=-1)
                model.skip_layers(2, 2)
            runs[spelling] = model.logits.save()
    assert torch.equal(runs["legacy"], runs["standard"])
    with torch.no_grad(), model.trace(PROMPT):
        model.skip_layers(start_layer=0, end_layer=1, skip_with=None, layer_returns_tuple=True)
        skipped = model.layers[2].layer_input.save()
    with torch.no_grad(), model.trace(PROMPT):
        stream = model.layers[0].layer_input.save()
    assert torch.equal(skipped, stream)
    path = model._module.config._name_or_path
    with pytest.raises(TypeError, match="adding-a-family"):
        StandardizedTransformer(path, rename_config=object())
    with pytest.raises(ValueError, match="eager"):
        StandardizedTransformer(path, enable_attention_probs=True, attn_implementation="sdpa")


def test_interventions_are_the_toolkit_with_13_layouts(tiny_model):
    model = tiny_model("llama")
    prompts = ["The capital of France is", "Hello"]
    assert torch.equal(logit_lens(model, prompts), lens.logit_lens(model, prompts, positions=-1))
    probs, inverse = logit_lens(model, prompts, return_inv_logits=True)
    assert probs.shape == (2, model.num_layers, model.vocab_size) and inverse.shape == probs.shape
    # a target per source (another prompt each): one toolkit call per source; latents give the same as the sources' states
    targets = [TargetPrompt("cat -> cat; dog ->", -1), TargetPrompt("1135 -> 1135; hello", -2)]
    patched = patchscope_lens(model, prompts, targets, layers=[0, 2])
    for row, target in enumerate(targets):
        alone = lens.patchscope_lens(model, prompts[row : row + 1], target.prompt, layers=[0, 2], target_position=target.index_to_patch, progress=False)
        assert torch.equal(patched[row : row + 1], alone)
    with torch.no_grad(), model.trace(prompts):
        latents = torch.stack([model.layers[layer].layer_output[:, -1] for layer in (0, 2)]).save()
    assert torch.allclose(patchscope_lens(model, latents=latents, target_patch_prompts=targets, layers=[0, 2]), patched, atol=ATOL)
    generated = patchscope_generate(model, prompts[:1], targets[0], max_length=3, layers=[1])
    new = lens.patchscope_generate(model, prompts[:1], targets[0].prompt, layers=[1], max_new_tokens=3, progress=False)
    target_ids = model.tokenizer(targets[0].prompt, return_tensors="pt").input_ids
    assert torch.equal(generated[1], torch.cat([target_ids, new[1]], dim=1))
    # a prompt's own last-token attention input patched into itself changes nothing
    own = patch_object_attn_lens(model, prompts[0], prompts[0], attn_idx_patch=-1, num_patches=2)
    clean = lens.next_token_probs(model, [prompts[0]])
    assert own.shape == (1, model.num_layers, model.vocab_size)
    assert torch.allclose(own, clean[:, None].expand_as(own), atol=ATOL)


def test_readme_of_13_runs_unchanged_and_prints_its_translation(tmp_path):
    from nnterp import TinyConfig
    from nnterp_conformance.checkpoints import write_checkpoint

    write_checkpoint(TinyConfig("llama", {"num_hidden_layers": 12}), tmp_path)
    runs = {}
    for script in ("readme_examples.py", "readme_examples_standard.py"):
        runs[script] = subprocess.run([sys.executable, str(EXAMPLES / script), str(tmp_path)], capture_output=True, text=True, timeout=300)
        assert runs[script].returncode == 0, runs[script].stderr[-3000:]
    old, new = runs["readme_examples.py"], runs["readme_examples_standard.py"]
    assert old.stdout == new.stdout and len(old.stdout.splitlines()) == 14
    warned = collections.Counter(re.findall(r"LegacyName: (\S+) is nnterp 1\.3's name", old.stderr))
    assert set(warned.values()) == {1}, warned
    assert set(warned) == {
        "model.attentions_output", "model.mlps_output", "model.layers_output", "model.next_token_probs",
        "nnterp.interventions.logit_lens", "nnterp.interventions.patchscope_lens",
        "nnterp.interventions.patchscope_lens(layer_to_patch=)", "model.steer(steering_vector=)",
        "nnterp.prompt_utils.Prompt", "nnterp.prompt_utils.run_prompts",
    }
    assert "LegacyName" not in new.stderr
