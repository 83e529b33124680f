"""Reasons a value is unavailable that several families share, worded once."""

NOT_ON_INTERFACE = (
    "The attention does its own arithmetic rather than transformers' shared attention "
    "interface; not mapped for this family yet"
)
PARALLEL = "a parallel block: the attention and the MLP read the same input, so there is no stream between them"
POST_NORM_ATTENTION = "a post-norm block: the attention reads the residual stream itself, layer_input"
POST_NORM_MLP = "a post-norm block: the MLP reads the residual stream itself, layer_mid"

# The residual terms a block has only where its arithmetic adds them (``Layer.contributions``): on every other block the
# term is zero by construction, and each says so rather than serving a tensor of zeros.
INPUT_NOT_RESCALED = "this block adds its mixers' outputs to layer_input as it is: nothing rescales the stream there"
MID_NOT_RESCALED = "this block adds its MLP's output to layer_mid as it is: nothing rescales the stream there"
NO_PER_LAYER_INPUT = "this block takes no per-layer input: only its sublayers add to the stream"
OUTPUT_NOT_RESCALED = (
    "this block returns the sum of its stream and its sublayers' outputs as it is: nothing rescales it"
)
#: the reasons above: a term the block does not have, rather than a value it cannot serve
ABSENT_TERMS = (INPUT_NOT_RESCALED, MID_NOT_RESCALED, NO_PER_LAYER_INPUT, OUTPUT_NOT_RESCALED)
