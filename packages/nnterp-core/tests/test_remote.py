"""Standard values survive nnsight's remote serialization: ``remote="local"`` runs the shipped trace and agrees with a local one."""

import json
import pickle
import subprocess
import sys

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


#: run in a process of its own: nnsight's remote="local" hides every module a server would lack (nnterp, kernels,
#: huggingface_hub, anyio ...) while it deserializes, so the modules it re-imports depend on what the process imported
#: before; under pytest-xdist a worker's history once made it re-import anyio while nnsight's ``save`` was on every
#: object, which anyio's TypedAttributeSet refuses. A fresh process is what a researcher's script is.
SCRIPT = """
import json, sys
import torch
from nnterp_conformance import tiny_checkpoint
from nnterp import StandardizedTransformer

PROMPTS = %r
model = StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="eager")


def run(remote):
    saved = []
    with torch.no_grad(), model.trace(PROMPTS, remote=remote):
        attention = model.layers[1].self_attn
        saved.append(attention.attention_probabilities.save())
        attention.attention_output = attention.attention_output * 0.5
        saved.append(model.layers[1].layer_output.save())
        saved.append(model.logits.save())
    return saved


local, shipped = run(False), run("local")
with torch.no_grad(), model.trace(PROMPTS):
    plain = model.logits.save()
print("RESULT" + json.dumps({
    "equal": [bool(torch.equal(here, there)) for here, there in zip(local, shipped)],
    # the write took effect in both: the logits differ from an unedited run
    "edited": not torch.allclose(plain, shipped[-1]),
}))
""" % (PROMPTS,)


def test_remote_local_reads_and_writes_agree_with_a_local_run():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.split("RESULT", 1)[1])
    assert found["equal"] == [True, True, True], found
    assert found["edited"], found
