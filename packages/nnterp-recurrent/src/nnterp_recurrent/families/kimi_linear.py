"""Kimi-Linear: Kimi delta attention (a gated DeltaNet whose decay is per key channel) beside latent softmax attention.

Both mixers are ``self_attn`` natively; the delta blocks' is aliased
``linear_attn`` by its class, which is the name its values go by. The MLP is
DeepSeek-V3's: a sigmoid router with grouped choice and a selection bias, a
shared expert, dense blocks where ``mlp_layer_types`` says so.
"""

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import EProperty, SigmoidMoe
from nnterp.families import default
from nnterp.tiny import TinyConfig

from torch import Tensor
from transformers.models.kimi_linear import modeling_kimi_linear as modeling

from ..components import LinearAttention
from ..family import RecurrentFamily
from ..layouts import ChannelGates
from ..tiny import KIMI_DELTA

#: DeepSeek-V3's block names, which Bailing shares: the default block, its mixture's router at ``mlp.gate``
BLOCK_NAMES = {**default.FAMILY.rename, "mlp.gate": "mlp.router"}
#: DeepSeek-V3's components, which Bailing shares: the default block, its MLP a sigmoid-routed mixture
BLOCK = {**default.FAMILY.envoys, "layers.*.mlp": SigmoidMoe}


class KimiDeltaAttention(LinearAttention):
    """Kimi delta attention: LinearAttention with one decay per head and key channel, every head its own keys."""

    CHUNK_KERNEL = "chunk_kimi_delta_attention_0"
    RECURRENT_KERNEL = "recurrent_kimi_delta_attention_0"
    STATE_OP = "last_recurrent_state_2"

    @property
    def num_heads(self) -> int:
        return self._module.num_heads

    @property
    def num_key_heads(self) -> int:
        return self._module.num_heads

    @property
    def key_dim(self) -> int:
        return self._module.head_dim

    @property
    def value_dim(self) -> int:
        return self._module.head_dim

    @EProperty(
        LinearAttention.kernel_at("inputs"),
        "The log of how much of each key channel of the state each token keeps",
        select="g",
    )
    def decays(self, value: Tensor) -> ChannelGates:
        """The gate, ``[batch, seq, heads, key_dim]``: per key channel, the log of how much of the state a token keeps; non-positive.

        Each row of a head's state (one key channel) is multiplied by ``exp`` of its decay before the token writes.
        """
        return value


FAMILY = RecurrentFamily(
    name="kimi_linear",
    model_types=("kimi_linear",),
    modeling=(modeling.__name__,),
    rename={**BLOCK_NAMES, modeling.KimiLinearDeltaAttention: "linear_attn"},
    envoys={**BLOCK, modeling.KimiLinearDeltaAttention: KimiDeltaAttention},
    tiny={"kimi_linear": TinyConfig("kimi_linear", KIMI_DELTA)},
)
