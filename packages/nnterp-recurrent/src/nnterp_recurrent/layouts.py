"""The shapes of a recurrent mixer's values, as jaxtyping types over named axes.

An axis that is a fact about the model is named as the size that holds it,
read off the mixer's envoy (``nnterp.axis_size``): its heads, the key and
value widths of one head, the state width of a scan.
"""

from jaxtyping import Float
from nnterp.layouts import declare
from nnterp.layouts import BATCH, SEQ
from torch import Tensor

MIXER_HEADS = "num_heads"
KEY_HEADS = "num_key_heads"
KEY_DIM = "key_dim"
VALUE_DIM = "value_dim"

#: a gated DeltaNet's queries or keys as its kernel receives them: one per key head
LinearQK = Float[Tensor, f"{BATCH} {SEQ} {KEY_HEADS} {KEY_DIM}"]
LinearV = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {VALUE_DIM}"]
#: one number per token and head: a gate, a write strength
Gates = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS}"]
#: one number per token, head and key channel: Kimi delta attention's per-channel gate
ChannelGates = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {KEY_DIM}"]
LinearHeadOutputs = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {VALUE_DIM}"]
#: the recurrent state: one key_dim x value_dim matrix per head
State = Float[Tensor, f"{BATCH} {MIXER_HEADS} {KEY_DIM} {VALUE_DIM}"]
States = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {KEY_DIM} {VALUE_DIM}"]
declare(dict(globals()))
