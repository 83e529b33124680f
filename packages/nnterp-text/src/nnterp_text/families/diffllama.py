"""DiffLlama: the default block whose attention calls the shared interface twice and subtracts head pairs.

Both calls get the same queries and keys and one half of the values each, so
each computes the same scores and pattern; the two outputs are joined, then
head ``h`` minus ``lambda`` times head ``h + num_heads / 2``, group-normed,
goes to ``o_proj``. The queries and keys are the first call's arguments, an
assignment copied into the live tensor so that it reaches both calls; the
values are the stream before it is halved. The scores and the pattern exist
once per call, so no one tensor is what the values are mixed with: they are
unavailable, and so are per-head outputs, which ``o_proj`` never receives.
"""

from nnterp import Attention, TinyConfig, unavailable
from nnterp.families import default

TWO_CALLS = (
    "differential attention: the shared interface runs twice, on the same queries and keys and one half "
    "of the values each, so the scores and the pattern are computed twice and an edit of either copy "
    "reaches half of the values; no one tensor is what the values are mixed with"
)
PAIRED_HEADS = (
    "differential attention: o_proj receives num_heads / 2 differential heads, each 2 * head_dim wide "
    "(head h's output minus lambda times head h + num_heads / 2's, group-normed), not one output per head"
)


class DifferentialAttention(Attention):
    """DiffLlama's attention: queries, keys and values are served once for both interface calls; the rest is not one tensor."""

    attention_queries = Attention.attention_queries.at(assign_in_place=True)
    attention_keys = Attention.attention_keys.at(assign_in_place=True)
    attention_values = Attention.attention_values.at("source.torch_chunk_0.input", select=None)
    attention_scores = unavailable(TWO_CALLS)
    attention_probabilities = unavailable(TWO_CALLS)
    attention_head_outputs = unavailable(PAIRED_HEADS)


FAMILY = default.FAMILY.replace(
    name="diffllama",
    model_types=("diffllama",),
    envoys={**default.FAMILY.envoys, "layers.*.self_attn": DifferentialAttention},
    tiny={"diffllama": TinyConfig("diffllama")},
    skips={
        "diffllama": {
            "head_outputs_are_pattern_against_values": "differential attention",
            "head_outputs_make_the_projection": "differential attention",
            "pattern_is_softmax_of_scores": "differential attention",
            "scores_are_queries_against_keys": "differential attention",
            "written_pattern_moves_logits": "differential attention",
        },
    },
)
