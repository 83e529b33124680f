"""Reasons a value is unavailable that several families share, worded once."""

NOT_ON_INTERFACE = (
    "The attention does its own arithmetic rather than transformers' shared attention "
    "interface; not mapped for this family yet"
)
PARALLEL = (
    "a parallel block: the attention and the MLP read the same input, so there is no "
    "stream between them"
)
POST_NORM_ATTENTION = "a post-norm block: the attention reads the residual stream itself, layer_input"
POST_NORM_MLP = "a post-norm block: the MLP reads the residual stream itself, layer_mid"
