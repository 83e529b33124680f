"""DeepSeek-V3: the default block (latent attention), dense first blocks, then mixtures with a sigmoid router.

The router scores with a sigmoid, chooses by the scores plus its
``e_score_correction_bias`` within the best ``topk_group`` of ``n_group``
groups, weighs by the unbiased scores, renormalizes (``norm_topk_prob``) and
scales (``routed_scaling_factor``): ``Moe.route`` reads each from the router.
``shared_experts`` runs beside the routed ones. The first
``first_k_dense_replace`` blocks are dense: their routing values say so.
"""

from nnterp import Moe
from nnterp.families import default

RENAME = {**default.RENAME, "mlp.gate": "mlp.router"}


class SigmoidMoe(Moe):
    SCORING = "sigmoid"


ENVOYS = {**default.ENVOYS, "layers.*.mlp": SigmoidMoe}
