"""The protocols the toolkit and the kit annotate ``model`` with name only what a loaded model has.

mypy cannot hold ``StandardizedTransformer`` to ``StandardModel`` (an envoy's ``__getattr__`` answers every name),
so this does, on a loaded text model and a loaded vision-language model.
"""

import nnsight
import pytest
import torch
from nnterp.protocols import StandardModel, VisionModel, members
from nnterp_conformance.runner import load

IN_A_TRACE = ("inputs", "logits", "output")  # values of the forward, in its order: read only while it runs


@pytest.mark.parametrize(("checkpoint", "protocol"), [("llama", StandardModel), ("gemma3", VisionModel)])
def test_a_loaded_model_has_every_member_of_its_protocol(checkpoint, protocol):
    model = load(checkpoint)
    names = members(protocol)
    assert set(IN_A_TRACE) <= set(names) and {"layers", "num_layers", "family", "trace"} <= set(names)
    missing = [name for name in names if name not in IN_A_TRACE and not hasattr(model, name)]
    with torch.no_grad(), model.trace("Hello world"):
        read = nnsight.save({name: getattr(model, name) for name in IN_A_TRACE})
    assert not missing, f"{checkpoint}: {protocol.__name__} declares {missing}, which the model lacks"
    assert read["logits"].shape[-1] == model.vocab_size and len(model.layers) == model.num_layers


def test_a_protocol_lists_its_bases_members_and_its_own():
    assert set(members(VisionModel)) == set(members(StandardModel)) | {"vision", "projector", "processor"}
