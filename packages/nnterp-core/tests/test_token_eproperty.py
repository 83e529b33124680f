"""TokenEProperty: a tensor the model holds flat over tokens, read and written per invoke as [batch, seq, ...]."""

import pytest
import torch
from nnterp import Mlp, StandardizedTransformer, TokenEProperty
from torch import nn


class Flat(nn.Module):
    """The MLP's projection run on every token as one row, as experts modules do."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


class FlatMlp(nn.Module):
    def __init__(self, mlp: nn.Module) -> None:
        super().__init__()
        self.mlp = mlp
        self.flat = Flat(nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        return self.mlp(self.flat(x.reshape(batch * seq, width)).view(batch, seq, width))


class TokenMlp(Mlp):
    tokens = TokenEProperty("flat.output", "The MLP's input, token-flat in the model")


@pytest.fixture(scope="module")
def model():
    from nnterp_conformance import tiny_checkpoint
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_checkpoint("llama")
    module = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    module.model.layers[0].mlp = FlatMlp(module.model.layers[0].mlp)
    return StandardizedTransformer(
        module, tokenizer=AutoTokenizer.from_pretrained(path), envoys={"layers.0.mlp": TokenMlp}
    )


def test_reads_are_this_invokes_rows_of_the_flat_tensor(model):
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke("The Eiffel Tower is in Paris"):
            stream_first = model.layers[0].mlp_input.save()
            first = model.layers[0].mlp.tokens.save()
        with tracer.invoke(["Hello world", "the fox"]):
            stream_second = model.layers[0].mlp_input.save()
            second = model.layers[0].mlp.tokens.save()
    assert first.shape[0] == 1 and second.shape[0] == 2 and first.shape[1] == second.shape[1]
    # the FlatMlp wrapper's input is the pre-norm output: its flat rows, per invoke
    assert torch.equal(first, stream_first) and torch.equal(second, stream_second)


def test_writes_under_two_invokes_stay_in_their_rows(model):
    prompts = ["The Eiffel Tower is in Paris", "Hello world"]
    with torch.no_grad(), model.trace(prompts):
        baseline = model.logits.save()
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(prompts[0]):
            tokens = model.layers[0].mlp.tokens
            model.layers[0].mlp.tokens = tokens * 0
            first = model.logits.save()
        with tracer.invoke(prompts[1]):
            second = model.logits.save()
    assert not torch.equal(first, baseline[:1])
    assert torch.allclose(second, baseline[1:], atol=1e-5)


def test_in_place_edits_land_on_the_model_tensor(model):
    with torch.no_grad(), model.trace("Hello world"):
        baseline = model.logits.save()
    with torch.no_grad(), model.trace("Hello world"):
        model.layers[0].mlp.tokens[:, -1] = 0
        edited = model.logits.save()
    assert torch.equal(edited[:, :-1], baseline[:, :-1]) and not torch.equal(edited[:, -1], baseline[:, -1])
