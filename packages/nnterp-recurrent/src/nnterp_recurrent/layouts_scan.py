"""The shapes of a selective scan's values (Mamba-1), as jaxtyping types over named axes.

A scan's state is one ``state_dim`` vector per channel of the mixer's inner
width, so its values are laid out over channels where a DeltaNet's are laid
out over heads. The axes are read off the mixer's envoy (``nnterp.axis_size``).
"""

from jaxtyping import Float
from nnterp.layouts import BATCH, SEQ, declare
from torch import Tensor

#: the mixer's inner width: each channel carries its own state
CHANNELS = "channels"
#: the width of one channel's state, and of B and C
STATE_DIM = "state_dim"
#: how many channel groups share one B and C (one on Mamba-1)
GROUPS = "num_groups"

#: B or C as the scan receives them, one per group: what writes into the state and what reads it
ScanQK = Float[Tensor, f"{BATCH} {SEQ} {GROUPS} {STATE_DIM}"]
#: one number per token and channel: the scan's input x, or its output y
ScanValues = Float[Tensor, f"{BATCH} {SEQ} {CHANNELS}"]
#: the step size dt per token and channel
ScanSteps = Float[Tensor, f"{BATCH} {SEQ} {CHANNELS}"]
#: the log decay dt * A per token, channel and state dimension
ScanDecays = Float[Tensor, f"{BATCH} {SEQ} {CHANNELS} {STATE_DIM}"]
#: the recurrent state: one state_dim vector per channel
ScanState = Float[Tensor, f"{BATCH} {CHANNELS} {STATE_DIM}"]
ScanStates = Float[Tensor, f"{BATCH} {SEQ} {CHANNELS} {STATE_DIM}"]
declare(dict(globals()))
