"""The shapes of a Mamba-2 (SSD) mixer's values, beside the shared recurrent layouts.

A Mamba-2 head's state is ``state_dim`` by ``head_dim``; its queries and keys
(``C`` and ``B``) come one per group of heads, its values and outputs one per
head. The state itself is the shared ``State`` (key side first).
"""

from jaxtyping import Float
from nnterp.layouts import BATCH, SEQ, declare
from torch import Tensor

from .layouts import MIXER_HEADS

GROUPS = "num_groups"
STATE_DIM = "state_dim"
HEAD_DIM = "head_dim"

#: C or B as the scan receives them: one per group of heads
SSDQueries = Float[Tensor, f"{BATCH} {SEQ} {GROUPS} {STATE_DIM}"]
SSDKeys = Float[Tensor, f"{BATCH} {SEQ} {GROUPS} {STATE_DIM}"]
#: x, what each head writes into its state
SSDValues = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {HEAD_DIM}"]
SSDHeadOutputs = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {HEAD_DIM}"]
declare(dict(globals()))
