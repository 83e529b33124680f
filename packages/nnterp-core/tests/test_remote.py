"""Standard values survive nnsight's remote serialization: ``remote="local"`` runs the shipped trace and agrees with a local one."""

import pickle

import cloudpickle
import torch
from nnterp import Attention, EProperty, Layer

PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def test_values_pickle_by_value_with_their_reads():
    # a family's classes are not installed on a remote server: they travel by value, descriptors and all
    for value in (Layer.layer_output, Attention.attention_probabilities, Layer.layer_mid):
        restored = pickle.loads(cloudpickle.dumps(value))
        assert type(restored) is type(value) and isinstance(restored, EProperty)
        assert (restored.name, restored.key, restored.select) == (value.name, value.key, value.select)
        assert restored.dims == value.dims and restored.__doc__ == value.__doc__


def _run(model, remote):
    saved = []
    with torch.no_grad(), model.trace(PROMPTS, remote=remote):
        attention = model.layers[1].self_attn
        saved.append(attention.attention_probabilities.save())
        attention.attention_output = attention.attention_output * 0.5
        saved.append(model.layers[1].layer_output.save())
        saved.append(model.logits.save())
    return saved


def test_remote_local_reads_and_writes_agree_with_a_local_run(tiny_model):
    model = tiny_model("llama")
    local, shipped = _run(model, False), _run(model, "local")
    for here, there in zip(local, shipped):
        assert torch.equal(here, there)
    # and the write took effect in both: the logits differ from an unedited run
    with torch.no_grad(), model.trace(PROMPTS):
        plain = model.logits.save()
    assert not torch.allclose(plain, shipped[-1])
