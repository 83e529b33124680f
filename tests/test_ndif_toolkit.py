"""Every toolkit function that takes ``remote=`` gives, on the local NDIF stack, exactly what it gives locally.

One model (llama's tiny checkpoint, eager attention so the heads are served) deployed once; each function is called
twice, ``remote=False`` and ``remote=<the stack's URL>``, and the results are compared field by field with
``torch.equal``, in the server's torch thread count. A function that keeps values in a container it fills inside its
trace must save the container: a server sends back only the saved values bound to names.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch
from nnterp.toolkit import (
    Ablation,
    Dictionary,
    Prompt,
    TunedLens,
    ablate_features,
    ablation_sweep,
    attribution_patching,
    cache_values,
    evaluate_dictionary,
    extract_values,
    feature_activations,
    generate_steered,
    integrated_gradients,
    load_activations,
    logit_lens,
    next_token_probs,
    patch_attention_output,
    patch_heads,
    patch_heads_by_position,
    patch_mlp_output,
    patch_paths,
    patch_residual,
    patchscope_generate,
    patchscope_lens,
    run_prompts,
    run_with_dictionary,
    set_features,
    steer,
    steer_features,
    tuned_lens,
)

_spec = importlib.util.spec_from_file_location("ndif_client", Path(__file__).with_name("ndif_client.py"))
client = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(client)

pytestmark = pytest.mark.xdist_group("ndif_server")
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
CLEAN = ["When John and Mary went to the shop, John gave a drink to"]
CORRUPTED = ["When John and Mary went to the shop, Mary gave a drink to"]


@pytest.fixture(scope="module")
def api() -> str:
    return client.api_or_skip()


@pytest.fixture(scope="module")
def model(api):
    with client.server_threads():
        yield client.served("llama", attn_implementation="eager")


def metric_of(model):
    ids = [model.tokenizer(letter)["input_ids"][-1] for letter in "JM"]
    return lambda logits: (logits[:, -1, ids[0]] - logits[:, -1, ids[1]]).mean()


def dictionary_for(model) -> Dictionary:
    generator = torch.Generator().manual_seed(0)
    d, features = model.hidden_size, 16
    W_enc, W_dec = torch.randn(d, features, generator=generator) / d**0.5, torch.randn(features, d, generator=generator) / features**0.5
    return Dictionary.from_tensors(W_enc, W_dec, torch.zeros(features), torch.zeros(d), reads="layers.1.layer_input")


def calls(model, tmp_path: Path) -> dict:
    """Each toolkit function, as a call of ``remote``."""
    metric, sae, vector = metric_of(model), dictionary_for(model), torch.randn(model.hidden_size, generator=torch.Generator().manual_seed(1))
    sweep = {"progress": False}

    def ablated(remote):
        ablation = Ablation(model, heads=[(0, 1)], mlp=[1], how="mean", reference=PROMPTS, remote=remote)
        return next_token_probs(model, CLEAN, edit=lambda m: ablation.apply(), remote=remote)

    def extracted(remote):
        directory = tmp_path / f"acts-{bool(remote)}"
        extract_values(model, PROMPTS, ["layers.0.layer_output", "layers.1.mlp.mlp_output"], directory, batch_size=1, progress=False, remote=remote)
        shards = load_activations(directory)
        return {name: shards[name] for name in shards.values}

    return {
        "logit_lens": lambda remote: logit_lens(model, PROMPTS, embeddings=True, inverse=True, remote=remote),
        "next_token_probs": lambda remote: next_token_probs(model, PROMPTS, edit=lambda m: steer(m, 1, vector), remote=remote),
        "run_prompts": lambda remote: run_prompts(model, [Prompt.from_strings("The Eiffel Tower is in", {"city": "Paris"}, model)], progress=False, remote=remote),
        "tuned_lens": lambda remote: tuned_lens(model, PROMPTS, TunedLens.identity(model), remote=remote),
        "patchscope_lens": lambda remote: patchscope_lens(model, PROMPTS, "cat -> cat; 1 -> 1; x ->", progress=False, remote=remote),
        "patchscope_generate": lambda remote: patchscope_generate(model, PROMPTS, "cat -> cat; x ->", layers=[0, 1], max_new_tokens=3, progress=False, remote=remote),
        "generate_steered": lambda remote: generate_steered(model, PROMPTS, 1, vector, max_new_tokens=3, remote=remote),
        "cache_values": lambda remote: cache_values(model, PROMPTS, ["layers.0.layer_output", "layers.1.self_attn.attention_probabilities"], progress=False, remote=remote),
        "patch_residual": lambda remote: patch_residual(model, CLEAN, CORRUPTED, metric, remote=remote, **sweep),
        "patch_attention_output": lambda remote: patch_attention_output(model, CLEAN, CORRUPTED, metric, remote=remote, **sweep),
        "patch_mlp_output": lambda remote: patch_mlp_output(model, CLEAN, CORRUPTED, metric, remote=remote, **sweep),
        "patch_heads": lambda remote: patch_heads(model, CLEAN, CORRUPTED, metric, remote=remote, **sweep),
        "patch_heads_by_position": lambda remote: patch_heads_by_position(model, CLEAN, CORRUPTED, metric, layers=[1], heads=[0, 1], positions=[-2, -1], remote=remote, **sweep),
        "patch_paths": lambda remote: patch_paths(model, CLEAN, CORRUPTED, metric, [(1, "q", 1), (1, "mlp")], layers=[0], remote=remote, **sweep),
        "attribution_patching": lambda remote: attribution_patching(model, CLEAN, CORRUPTED, metric, values=["heads", "layer_output"], remote=remote),
        "integrated_gradients": lambda remote: integrated_gradients(model, CLEAN, metric, "layers.1.layer_input", steps=3, progress=False, remote=remote),
        "ablation_sweep": lambda remote: ablation_sweep(model, CLEAN, metric, "heads", how="mean", reference=PROMPTS, remote=remote, **sweep),
        "Ablation": ablated,
        "extract_values": extracted,
        "feature_activations": lambda remote: feature_activations(model, sae, PROMPTS, progress=False, remote=remote),
        "run_with_dictionary": lambda remote: run_with_dictionary(model, sae, PROMPTS, edit=lambda f: f * 2, keep_error=True, remote=remote),
        "ablate_features": lambda remote: ablate_features(model, sae, PROMPTS, [0, 3], remote=remote),
        "set_features": lambda remote: set_features(model, sae, PROMPTS, [1], 2.0, remote=remote),
        "steer_features": lambda remote: steer_features(model, sae, PROMPTS, [2], 3.0, remote=remote),
        "evaluate_dictionary": lambda remote: evaluate_dictionary(model, sae, PROMPTS, progress=False, remote=remote),
    }


def differences(local, remote, at: str = "result") -> list[str]:
    """Where ``remote`` is not exactly ``local``: tensors by ``torch.equal``, containers and dataclasses field by field."""
    if isinstance(local, torch.Tensor):
        if not isinstance(remote, torch.Tensor) or local.shape != remote.shape or local.dtype != remote.dtype:
            return [f"{at}: {getattr(remote, 'shape', type(remote).__name__)}, locally {tuple(local.shape)} {local.dtype}"]
        return [] if torch.equal(local, remote) else [f"{at}: differs by up to {(local.double() - remote.double()).abs().max().item():.3g}"]
    if dataclasses.is_dataclass(local) and not isinstance(local, type):
        return [found for field in dataclasses.fields(local) for found in differences(getattr(local, field.name), getattr(remote, field.name), f"{at}.{field.name}")]
    if isinstance(local, Mapping):
        if list(local) != list(remote):
            return [f"{at}: keys {list(remote)}, locally {list(local)}"]
        return [found for key in local for found in differences(local[key], remote[key], f"{at}[{key!r}]")]
    if isinstance(local, (list, tuple)):
        if len(local) != len(remote):
            return [f"{at}: {len(remote)} items, locally {len(local)}"]
        return [found for index, (a, b) in enumerate(zip(local, remote)) for found in differences(a, b, f"{at}[{index}]")]
    return [] if local == remote else [f"{at}: {remote!r}, locally {local!r}"]


NAMES = [
    "logit_lens", "next_token_probs", "run_prompts", "tuned_lens", "patchscope_lens", "patchscope_generate", "generate_steered",
    "cache_values", "patch_residual", "patch_attention_output", "patch_mlp_output", "patch_heads", "patch_heads_by_position",
    "patch_paths", "attribution_patching", "integrated_gradients", "ablation_sweep", "Ablation", "extract_values",
    "feature_activations", "run_with_dictionary", "ablate_features", "set_features", "steer_features", "evaluate_dictionary",
]


def test_every_toolkit_function_taking_remote_is_tested_here():
    import inspect

    import nnterp.toolkit as toolkit

    def takes_remote(value) -> bool:
        try:
            return "remote" in inspect.signature(value).parameters
        except (TypeError, ValueError):  # an exception class written in C, a constant
            return False

    assert {name for name in toolkit.__all__ if takes_remote(getattr(toolkit, name))} == set(NAMES)


@pytest.mark.parametrize("function", NAMES)
def test_a_toolkit_function_on_the_server_equals_its_local_run(model, api, function, tmp_path):
    call = calls(model, tmp_path)[function]
    local, remote = call(False), call(api)
    assert not differences(local, remote), differences(local, remote)


def test_the_actor_survived(api):
    assert not client.crashes(client.stack()), client.crashes(client.stack())
