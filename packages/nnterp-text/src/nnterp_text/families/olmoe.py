"""OLMoE: the default block, its MLP a mixture of experts: ``gate`` a softmax router, ``experts`` fused.

The router takes the top-k of the softmax and renormalizes them when the
config's ``norm_topk_prob`` says so, as ``Moe`` reads it. Most softmax
mixtures (Qwen3-MoE, Mellum, Mixtral ...) are this family or a diff of it.
"""

from nnterp import Moe
from nnterp.families import default

RENAME = {**default.RENAME, "mlp.gate": "mlp.router"}
ENVOYS = {**default.ENVOYS, "layers.*.mlp": Moe}
