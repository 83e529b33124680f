"""Qwen2-MoE: OLMoE's mixture plus a shared expert whose output the block gates by ``sigmoid(shared_expert_gate(x))``.

The block computes ``shared_expert_output = sigmoid(shared_expert_gate(x))
* shared_expert(x)`` after the routed experts ran and adds it to them, so
``shared_expert_output`` is that gated product, read at the binding where
the block's forward makes it (``source.shared_expert_output_1``): writing it
changes what the block adds. ``shared_experts.output`` is the ungated
expert, ``shared_expert_gate.output`` the gate's logit. The first blocks
listed in ``mlp_only_layers`` are dense.
"""

from nnterp import Moe

from .olmoe import ENVOYS as OLMOE
from .olmoe import RENAME as OLMOE_NAMES

RENAME = {**OLMOE_NAMES, "mlp.shared_expert": "mlp.shared_experts"}


class GatedSharedMoe(Moe):
    #: the shared expert's gated product is an operation of this forward, read after the router runs:
    #: instrument the forward when built
    sourced = True
    shared_expert_output = Moe.shared_expert_output.at("source.shared_expert_output_1.output")


ENVOYS = {**OLMOE, "layers.*.mlp": GatedSharedMoe}
