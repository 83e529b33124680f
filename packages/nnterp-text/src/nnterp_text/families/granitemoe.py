"""Granite-MoE: Granite's scaled block with its mixture of experts at ``block_sparse_moe``.

The ``router`` takes the top-k of the raw logits and softmaxes only those,
as GPT-OSS's does (``TopKFirstMoe``). The block adds the mixture's output
times ``residual_multiplier``, so ``mlp_output``, ``mixture_output``,
``routed_output`` and ``expert_outputs`` are served scaled, as the block adds
them, and written back divided.
"""

from nnterp_text.families.gpt_oss import TopKFirstMoe
from nnterp_text.families.granite import ENVOYS as GRANITE
from nnterp_text.families.granite import RENAME as GRANITE_NAMES
from nnterp_text.families.granite import project_on_vocab, residual_multiplier  # noqa: F401 - the family's logits

RENAME = {**GRANITE_NAMES, "block_sparse_moe": "mlp"}


class GraniteMoe(TopKFirstMoe):
    """GPT-OSS's top-k-first mixture, each value the block adds scaled by ``residual_multiplier``."""

    mlp_output = TopKFirstMoe.mlp_output.scaled(residual_multiplier)
    mixture_output = TopKFirstMoe.mixture_output.scaled(residual_multiplier)
    routed_output = TopKFirstMoe.routed_output.scaled(residual_multiplier)
    expert_outputs = TopKFirstMoe.expert_outputs.scaled(residual_multiplier)


ENVOYS = {**GRANITE, "layers.*.mlp": GraniteMoe}
