"""A recurrent mixer's values asked of a softmax attention, and the reverse: Unavailable with the kind of mixer each block has."""

import pytest
import torch
from nnterp.errors import OtherComponent

import nnterp_recurrent  # noqa: F401 - its mixers declare the state values


@pytest.mark.parametrize("name", ["state_output", "decays", "state_after"])
def test_state_values_on_an_attention_say_it_keeps_no_state(tiny_model, name):
    model = tiny_model("llama")
    assert not hasattr(model.layers[0].self_attn, name)
    with pytest.raises(OtherComponent, match=rf"layers\[0\].self_attn.{name} is unavailable: this block's mixer is softmax attention, which keeps no recurrent state"):
        with torch.no_grad(), model.trace("Hello world"):
            getattr(model.layers[0].self_attn, name)


def test_a_pattern_asked_of_a_recurrent_mixer_says_it_has_no_softmax(tiny_model):
    model = tiny_model("qwen3_next")
    layer = next(index for index, block in enumerate(model.layers) if "linear_attn" in block.__dict__)
    with pytest.raises(OtherComponent, match=rf"layers\[{layer}\].linear_attn.attention_probabilities is unavailable: this block's mixer is recurrent.*belongs to Attention"):
        model.layers[layer].linear_attn.attention_probabilities
