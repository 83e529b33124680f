"""The default family on the model types it serves: every identity the kit checks, and sdpa's reasons."""

import pytest
import torch
from nnterp import Unavailable
from nnterp.families import default
from nnterp_conformance.runner import run

DEFAULT_TYPES = ["llama", "mistral", "qwen2", "qwen3"]
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


@pytest.mark.parametrize("name", DEFAULT_TYPES)
def test_default_family_passes_every_check(tiny_model, name):
    model = tiny_model(name)
    assert model.family is default.FAMILY
    verdicts = run(model, PROMPTS)
    failed = [str(verdict) for verdict in verdicts if verdict.status != "pass"]
    assert not failed, "\n".join(failed)


def test_grouped_query_keys_are_num_kv_heads_wide(tiny_model):
    model = tiny_model("llama")
    attention = model.layers[0].self_attn
    assert (attention.num_heads, attention.num_kv_heads) == (4, 2)
    with torch.no_grad(), model.trace("Hello world"):
        keys = attention.attention_keys.save()
        values = attention.attention_values.save()
        queries = attention.attention_queries.save()
    assert queries.shape[1] == 4 and keys.shape[1] == 2 and values.shape[1] == 2


def test_sdpa_makes_the_interior_unavailable_before_the_model_runs(tiny_model):
    model = tiny_model("llama", attn_implementation="sdpa")
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(Unavailable, match="eager") as raised:
            with model.trace("Hello world"):
                model.layers[0].self_attn.attention_probabilities.save()
    finally:
        hook.remove()
    assert calls == []
    support = model.support()
    assert support["self_attn.attention_probabilities"] == {layer: raised.value.reason for layer in range(model.num_layers)}
    assert support["self_attn.attention_output"] is None and support["layer_output"] is None
    with torch.no_grad(), model.trace("Hello world"):
        output = model.layers[0].self_attn.attention_output.save()
    assert output.shape[-1] == model.hidden_size


def test_generate_serves_each_step_at_its_length(tiny_model):
    model = tiny_model("llama")
    lengths = []
    with torch.no_grad(), model.generate("Hello world", max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
        for _ in tracer.iter[:3]:
            lengths.append(model.layers[1].layer_output.shape[1])
        result = tracer.result.save()
    prompt_length = len(model.tokenizer("Hello world")["input_ids"])
    assert lengths == [prompt_length, 1, 1]
    assert result.shape[1] == prompt_length + 3


def test_a_sharded_load_keeps_nnsights_tensor_parallel_envoys():
    from nnsight.modeling.tp.envoys import TPEnvoy
    from nnterp.families import default
    from nnterp.transformer import with_tensor_parallel

    from transformers.distributed import DistributedConfig

    sharded = with_tensor_parallel(dict(default.FAMILY.envoys), "some/model", {"distributed_config": DistributedConfig(tp_size=2)})
    assert sharded[torch.nn.Linear] is TPEnvoy and sharded[torch.nn.Embedding] is TPEnvoy
    assert all(sharded[key] is value for key, value in default.FAMILY.envoys.items())
    assert with_tensor_parallel(dict(default.FAMILY.envoys), "some/model", {}) == default.FAMILY.envoys
