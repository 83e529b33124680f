"""Mixtures of experts whose router departs from the default softmax one in one way, each shared by several families.

``Moe`` routes by a softmax over the logits, renormalizing the chosen weights
where the router's ``norm_topk_prob`` says so, and reads the shared expert's
output at ``shared_experts.output``. Each variant here changes one of those:
the scoring (``SigmoidMoe``), the renormalization (``MixtralMoe``), the
order of top-k and scoring (``TopKFirstMoe``), or where the shared expert's
contribution is (``GatedSharedMoe``).
"""

from .moe import Moe


class SigmoidMoe(Moe):
    """A mixture whose router scores with a sigmoid, as DeepSeek-V3's does.

    It chooses by the scores plus its ``e_score_correction_bias`` within the
    best ``topk_group`` of ``n_group`` groups, weighs by the unbiased scores,
    renormalizes (``norm_topk_prob``) and scales (``routed_scaling_factor``):
    ``Moe.route`` reads each from the router. DeepSeek-V3's block (and the
    types it serves: DeepSeek-V3.2, dots1, GLM-4-MoE, EXAONE-MoE, Solar
    Open), GLM-4.5V's and Kimi-K2.5's text models, HY-V3, Laguna, AXK2,
    dots3, MiMo-V2-Flash, MiniMax-M2 / M3, A.X-K1, Flint, and the hybrids
    Nemotron-H, Kimi-Linear and Bailing use it.
    """

    SCORING = "sigmoid"


class MixtralMoe(Moe):
    """A softmax mixture whose router renormalizes the top-k probabilities always, whatever the config says.

    Mixtral's, and Qwen3-VL-MoE's text model's (its config has no
    ``norm_topk_prob``).
    """

    NORMALIZE = True


class TopKFirstMoe(Moe):
    """A mixture whose router softmaxes the top-k logits only: the weights sum to one by construction.

    GPT-OSS's, Granite-MoE's and JetMoE's.
    """

    TOPK_FIRST = True
    NORMALIZE = False


class GatedSharedMoe(Moe):
    """A softmax mixture plus a shared expert whose output the block gates by ``sigmoid(shared_expert_gate(x))``.

    The block computes ``shared_expert_output = sigmoid(shared_expert_gate(x))
    * shared_expert(x)`` after the routed experts ran and adds it to them, so
    ``shared_expert_output`` is that gated product, read at the binding where
    the block's forward makes it (``source.shared_expert_output_1``): writing
    it changes what the block adds. ``shared_experts.output`` is the ungated
    expert. Qwen2-MoE's, Qwen3-Next's and Qwen3.5-MoE's.
    """

    #: the shared expert's gated product is an operation of this forward, read after the router runs:
    #: instrument the forward when built
    sourced = True
    shared_expert_output = Moe.shared_expert_output.at("source.shared_expert_output_1.output")
