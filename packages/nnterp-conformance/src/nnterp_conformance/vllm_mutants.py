"""Wrong vLLM families, the mistakes a careless author makes on vLLM's fused blocks; the flat checks must kill each.

Each is ``nnterp.vllm.families.LLAMA`` with one value read where it does not
live. ``MUTANTS`` names each with the check that kills it; the mutation
suite runs them on the Llama checkpoint and holds that check failing.
"""

from __future__ import annotations

from typing import cast

from nnterp.descriptors import EProperty
from nnterp.layouts import FlatResidual
from nnterp.vllm.components import FlatAttention, FlatLayer
from nnterp.vllm.families import LLAMA

from torch import Tensor


def _said(cls: type) -> str:
    """A class's docstring on one line (each mutant has one: it says what is wrong)."""
    return " ".join(cast(str, cls.__doc__).split())


class OneHalfLayer(FlatLayer):
    """The stream read as one of vLLM's halves: ``hidden_states`` alone, without the residual it is added to."""

    @EProperty("inputs", "The residual stream entering this block", select=1)
    def layer_input(self, value: Tensor) -> FlatResidual:
        return value


class PreviousBlockAttention(FlatAttention):
    """The attention's contribution read on the previous block: the ``hidden_states`` half this block receives,
    which is the previous block's MLP output (the embeddings on block 0)."""

    @EProperty("../inputs", "What the attention adds to the residual stream", select=1)
    def attention_output(self, value: Tensor) -> FlatResidual:
        return value


HALF_STREAM = LLAMA.replace(name="mutant_half_stream", envoys={**LLAMA.envoys, "layers.*": OneHalfLayer})
PREVIOUS_BLOCK = LLAMA.replace(
    name="mutant_previous_block", envoys={**LLAMA.envoys, "layers.*.self_attn": PreviousBlockAttention}
)

#: mutant -> (its family spec for StandardizedVLLM, the checkpoint it runs on, the flat check that must kill it, what is wrong)
MUTANTS: dict[str, tuple[str, str, str, str]] = {
    "half_stream": (f"{__name__}:HALF_STREAM", "vllm_llama", "flat_values_agree", _said(OneHalfLayer)),
    "previous_block": (f"{__name__}:PREVIOUS_BLOCK", "vllm_llama", "flat_contribution", _said(PreviousBlockAttention)),
}
