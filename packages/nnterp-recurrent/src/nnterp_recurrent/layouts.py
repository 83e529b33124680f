"""The shapes of the recurrent mixers' values, as jaxtyping types over named axes.

An axis that is a fact about the model is named as the size that holds it,
read off the mixer's envoy (``nnterp.axis_size``): its heads, the key and
value widths of one head, a scan's channels and state width. A gated DeltaNet
lays its values out over heads; a Mamba-1 scan over the channels of its inner
width, each with a ``state_dim`` state; a Mamba-2 (SSD) mixer over heads whose
state is ``state_dim`` by ``head_dim``, its ``C`` and ``B`` one per group of heads.
"""

from nnterp.layouts import BATCH, SEQ, declare

from jaxtyping import Float
from torch import Tensor

MIXER_HEADS = "num_heads"
KEY_HEADS = "num_key_heads"
KEY_DIM = "key_dim"
VALUE_DIM = "value_dim"
#: a scan's inner width: each channel carries its own state (Mamba-1)
CHANNELS = "channels"
#: the width of a scan's state per channel or head, and of its B and C
STATE_DIM = "state_dim"
#: how many channels or heads share one B and C
GROUPS = "num_groups"
HEAD_DIM = "head_dim"
#: a short convolution's window: how many tokens' inputs it holds
KERNEL_SIZE = "kernel_size"

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

# -- Mamba-1 (SelectiveScan) ----------------------------------------------------------
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

# -- Mamba-2 (StateSpace): its state is the shared State, key side first ----------------
#: C or B as the scan receives them: one per group of heads
SSDQueries = Float[Tensor, f"{BATCH} {SEQ} {GROUPS} {STATE_DIM}"]
SSDKeys = Float[Tensor, f"{BATCH} {SEQ} {GROUPS} {STATE_DIM}"]
#: x, what each head writes into its state
SSDValues = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {HEAD_DIM}"]
SSDHeadOutputs = Float[Tensor, f"{BATCH} {SEQ} {MIXER_HEADS} {HEAD_DIM}"]

# -- a short convolution (ShortConvolution): its state is the window of its last inputs ----
#: one number per token and channel: B, C, x, the conv's input and output, each channel's output
ConvChannels = Float[Tensor, f"{BATCH} {SEQ} {CHANNELS}"]
#: the window: the last kernel_size conv inputs, oldest first
Window = Float[Tensor, f"{BATCH} {KERNEL_SIZE} {CHANNELS}"]
Windows = Float[Tensor, f"{BATCH} {SEQ} {KERNEL_SIZE} {CHANNELS}"]

declare(dict(globals()))
