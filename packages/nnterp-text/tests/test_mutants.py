"""The mutation suite: every wrong family of the catalogue is killed by the check it names.

The standard mutants run on one checkpoint per way of computing the attention; the families' own mutants are the
mistakes their arithmetic invites. A survivor is a failing test, fixed by a stronger check, never by deleting the mutant.
``uv run nnterp-conformance mutants`` prints the same catalogue's score.
"""

import torch
from nnterp import Attention, Layer
from nnterp_conformance.mutants import Mutant, hooks_path_mutants, killed, moved, multi_stream_mutants, standard_mutants, toolkit_mutants
from nnterp_conformance.mutants import _detached
from nnterp.components.mlp import Mlp
from transformers.models.llama.modeling_llama import LlamaMLP
from transformers.models.beam.modeling_beam import BeamAttention as BeamModule
from transformers.models.doge.modeling_doge import DogeDecoderLayer
from transformers.models.falcon.modeling_falcon import FalconAttention as FalconModule
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextDecoderLayer
from transformers.models.gemma2.modeling_gemma2 import Gemma2DecoderLayer
from transformers.models.granite.modeling_granite import GraniteAttention as GraniteModule
from transformers.models.opt.modeling_opt import OPTDecoderLayer
from transformers.models.granite_swa.modeling_granite_swa import GraniteSWAAttention as GraniteSWAModule
from transformers.models.llama.modeling_llama import LlamaAttention
from transformers.models.longcat_flash.modeling_longcat_flash import LongcatFlashDecoderLayer
from transformers.models.zaya.modeling_zaya import ZayaAttention as ZayaModule

from nnterp_text.families.falcon import FalconAttention
from nnterp_text.families.granite_swa import GraniteSWAAttention
from nnterp.components.scaled import GraniteAttention
from nnterp_text.families.gemma2 import FAMILY as GEMMA2
from nnterp_text.families.opt import OPTLayer, token_flat
from nnterp_text.families.beam import BeamAttention
from nnterp_text.families.doge import DogeLayer
from nnterp_text.families.gemma4_text import ScaledStreamLayer
from nnterp_text.families.gemma3n_text import CORRECT, AltUpLayer, LaurelAttention
from transformers.models.gemma3n.modeling_gemma3n import Gemma3nTextAttention, Gemma3nTextDecoderLayer
from nnterp import PostNormAttention, StreamLayer
from nnterp_text.families.longcat_flash import LongcatFlashLayer
from nnterp_text.families.zaya import ZayaAttention


class UnscaledInputDogeLayer(DogeLayer):
    """Doge's block with input_residual forgotten: the stream taken to enter the attention's add as it is."""

    def rescaled_input(self, stream):
        return stream


class UnscaledGemma4Layer(ScaledStreamLayer):
    """Gemma 4's block with layer_scalar forgotten: the sum taken to leave the block as it is."""

    def output_scale(self):
        return torch.ones(1)


class OneSubBlockLongcatLayer(LongcatFlashLayer):
    """LongCat-Flash's layer read as one sub-block and its mixture: the second sub-block's terms forgotten."""

    def contributions(self):
        return ("self_attn.attention_output", "mlp.mlp_output", "first_mlp_output")


class ScaledOutputTimesOutput(ScaledStreamLayer):
    """Gemma 4's rescaling term taken as (layer_scalar - 1) * layer_output, the stream after the multiplication."""

    def _output_rescaling(self):
        return (self.output_scale() - 1) * self.layer_output

    layer_output_rescaling = Layer.layer_output_rescaling.derived(_output_rescaling)

class PerLayerOnEveryStream(AltUpLayer):
    """Gemma 3n's block with the per-layer input's term taken to reach every stream, the active one too."""

    def streams_added_to(self, name):
        return tuple(range(self.num_streams)) if name == "per_layer_input_output" else ()


#: one checkpoint per way of computing the attention: the shared interface (plain, gated, sink-scaled, softcapped,
#: with a dynamic mask, with ALiBi in the mask: falcon-alibi), a helper method, and the ALiBi families' own arithmetic; and per way of routing a mixture
#: (softmax top-k, renormalized or not, with a shared expert, sigmoid with grouped choice)
STANDARD_CHECKPOINTS = (
    "gpt2", "llama", "gemma2", "bloom", "mpt", "falcon-alibi", "afmoe", "granite_swa", "doge", "gpt_neo",
    "olmoe", "mixtral", "qwen2_moe", "deepseek_v3",
)

#: the families carrying several residual streams per token, each given the mistakes multi-stream blocks invite
MULTI_STREAM_CHECKPOINTS = ("deepseek_v4", "hy_v4", "gemma3n_text")

#: the checkpoints the toolkit's hooks path is given its mistakes on: GPT-2 adds a learned position per token, so a
#: left-padded row read at the wrong positions is off by far more than a rounding
HOOKS_PATH_CHECKPOINTS = ("gpt2",)

#: the checkpoints the toolkit's TransformerLens table and cache groups are given their mistakes on: GPT-2's plain
#: blocks, and Doge's, whose two rescaling terms a cache taking every block to add two terms drops
TOOLKIT_CHECKPOINTS = ("gpt2", "doge")

ROTARY = "source.apply_rotary_pos_emb_0.inputs"
#: the eager interface's softmax, which computes in float32 before the pattern is cast to the model's dtype
SOFTMAX = "source.attention_interface_1.source.nn_functional_softmax_0.output"


def _without_write_back(value):
    """``value`` read as it is, its write-back dropped: an assignment lands in the served layout, not the model's."""
    dropped = value.at()
    dropped._postprocess = None
    return dropped


def _put_back_as_it_was(value, marker="_nnterp_scaled_from"):
    """A value whose unedited read hands the model its own tensor back (``gradient_through`` dropped), off the served
    tensor's record; ``marker`` is the attribute its read leaves on the view (a scaled contribution's by default)."""
    kept = value.at()
    written = kept._transform

    def write_back(envoy, view, served):
        original, unedited = getattr(view, marker, (None, None))
        if original is not None and torch.equal(view, unedited):
            return original
        return written(envoy, view, served)

    kept._transform = write_back
    return kept


def family_mutants() -> list[Mutant]:
    """The mistakes particular families invite, each against the real component it would corrupt."""
    gemma_layer = GEMMA2.envoys.get("layers.*", Layer)
    before_cache = "keys and values read before layer_past.update: right on a prompt, one token short of the pattern on a decode step"
    seq_first_back = "the heads served seq first but written back as they are, not transposed to the matmul's heads-first layout (shipped, then fixed)"
    unscaled_back = "the scaled contribution's unedited read put back as the model's own tensor: right values, but the served product is off the graph (shipped, then fixed)"
    flat_mid = "layer_mid read where the final norm takes the flattened stream: a view beside the residual, so no gradient reaches it (shipped, then fixed)"
    forgot_scale = "the block taken to add the attention to layer_input as it is, input_residual forgotten: the rescaling term is zero"
    forgot_scalar = "layer_scalar forgotten (one in a fresh model): the block taken to return its sum as it is"
    streams_first = "the streams served as the model holds them, [num_streams, batch, seq, hidden], not permuted to [batch, seq, num_streams, hidden]"
    without_one = "the correction coefficients read as correction_coefs returns them, without the + 1 AltUp adds before spreading the innovation"
    unaveraged = "the attention's post-normed output read as it is, before the block averages it with LAuReL's and the active stream (divides by sqrt(2))"
    on_active = "the per-layer input's term taken to reach every stream, where the block adds it to corrected[1:] only, not the active stream"
    no_identity = "AltUp's prediction coefficients served as they are, without the identity predict adds back (predictions += hidden_states)"
    return [
        Mutant(
            "gemma3n_text: streams served streams first", "gemma3n_text",
            {Gemma3nTextDecoderLayer: moved(AltUpLayer, streams_first, layer_input=StreamLayer.layer_input.at(), layer_output=StreamLayer.layer_output.at())},
            "available_values_resolve", "but its layout", streams_first,
        ),
        Mutant(
            "gemma3n_text: correction coefficients without their + 1", "gemma3n_text",
            {Gemma3nTextDecoderLayer: moved(AltUpLayer, without_one, innovation_spread_weights=AltUpLayer.innovation_spread_weights.at(f"{CORRECT}.self_correction_coefs_0.output"))},
            "streams_follow_from_mixing", "against layer_output", without_one,
        ),
        Mutant(
            "gemma3n_text: the attention's share read before LAuReL's averaging", "gemma3n_text",
            {Gemma3nTextAttention: moved(LaurelAttention, unaveraged, attention_output=PostNormAttention.attention_output)},
            "stream_updates_add_up", "against innovation", unaveraged,
        ),
        Mutant(
            "gemma3n_text: the per-layer term added to the active stream too", "gemma3n_text",
            {Gemma3nTextDecoderLayer: PerLayerOnEveryStream}, "streams_follow_from_mixing", "against layer_output", on_active,
        ),
        Mutant(
            "gemma3n_text: prediction mixing without its identity", "gemma3n_text",
            {Gemma3nTextDecoderLayer: moved(AltUpLayer, no_identity, attention_stream_mixing=StreamLayer.attention_stream_mixing.at(AltUpLayer.attention_stream_mixing.key, select=None))},
            "streams_follow_from_mixing", "against layer_output", no_identity,
        ),
        Mutant(
            "doge: the residual's rescaling dropped", "doge",
            {DogeDecoderLayer: UnscaledInputDogeLayer}, "mid_stream", "against layer_mid", forgot_scale,
        ),
        Mutant(
            "gemma4_text: layer_scalar dropped", "gemma4_text",
            {Gemma4TextDecoderLayer: UnscaledGemma4Layer}, "contribution", "against layer_output", forgot_scalar,
        ),
        Mutant(
            "gemma4_text: layer_output_rescaling off the scaled stream", "gemma4_text",
            {Gemma4TextDecoderLayer: ScaledOutputTimesOutput}, "contribution", "against layer_output",
            "(layer_scalar - 1) times layer_output, the stream after the multiplication, not the sum before it",
        ),
        Mutant(
            "longcat_flash: the second sub-block's terms forgotten", "longcat_flash",
            {LongcatFlashDecoderLayer: OneSubBlockLongcatLayer}, "contribution", "against layer_output",
            "a LongCat-Flash layer decomposed as one sub-block and its mixture, the second attention and MLP left out",
        ),
        Mutant(
            "gemma4_text: per_layer_input_output read before its norm", "gemma4_text",
            {Gemma4TextDecoderLayer: moved(
                ScaledStreamLayer, "the per-layer branch's projection, before post_per_layer_input_norm",
                per_layer_input_output=Layer.per_layer_input_output.at("per_layer_projection.output"),
            )},
            "contribution", "against layer_output", "the per-layer input's term read at its projection, before the norm the block adds",
        ),
        Mutant(
            "beam: the attention's share read without its depth scale", "beam",
            {BeamModule: moved(BeamAttention, "the post norm's output as it is", attention_output=Attention.attention_output.at("../post_attention_layernorm.output", select=None))},
            "mid_stream", "against layer_mid", "the attention's post-normed output read as it is, where the block adds it divided by sqrt(k)",
        ),
        Mutant(
            "zaya: attention_output read before ResidualScaling", "zaya",
            {ZayaModule: moved(ZayaAttention, "the attention's own output", attention_output=Attention.attention_output.at("output", select=0))},
            "contribution", "against layer_output", "the attention's own output, where ResidualScaling adds (out + b) * s",
        ),
        Mutant(
            "granite: scaled attention_output put back off the graph", "granite",
            {GraniteModule: moved(GraniteAttention, unscaled_back, attention_output=_put_back_as_it_was(GraniteAttention.attention_output))},
            "gradients_are_derivatives", "is not on the path", unscaled_back,
        ),
        Mutant(
            "opt: layer_mid read at the final norm's flat input", "opt",
            {OPTDecoderLayer: moved(OPTLayer, flat_mid, layer_mid=token_flat(Layer.layer_mid, "final_layer_norm.input"))},
            "gradients_are_derivatives", "is not on the path", flat_mid,
        ),
        Mutant(
            "llama: mlp_neurons served detached", "llama",
            {LlamaMLP: moved(Mlp, "neurons off the graph", mlp_neurons=_detached(Mlp.mlp_neurons))},
            "interior_gradients_are_derivatives", "is not on the path",
            "mlp_neurons served as value.detach(): the same numbers and storage, so sums and in-place edits hold, but no gradient reaches it",
        ),
        Mutant(
            "gemma3n_text: prediction mixing put back off the graph", "gemma3n_text",
            {Gemma3nTextDecoderLayer: moved(AltUpLayer, "mixing without gradient_through", attention_stream_mixing=_put_back_as_it_was(AltUpLayer.attention_stream_mixing, "_nnterp_mixed_from"))},
            "interior_gradients_are_derivatives", "is not on the path",
            "the mixing's unedited read put back as the model's own coefficients, without gradient_through: right values, but the served mixing is off the graph",
        ),
        Mutant(
            "llama: keys read before the rotary embedding", "llama",
            {LlamaAttention: moved(Attention, "keys before rotation", attention_keys=Attention.attention_keys.at(ROTARY, select=1))},
            "scores_are_queries_against_keys", "queries @ keys^T", "the keys read where apply_rotary_pos_emb receives them, before rotation",
        ),
        Mutant(
            "llama: queries read before the rotary embedding", "llama",
            {LlamaAttention: moved(Attention, "queries before rotation", attention_queries=Attention.attention_queries.at(ROTARY, select=0))},
            "scores_are_queries_against_keys", "queries @ keys^T", "the queries read where apply_rotary_pos_emb receives them, before rotation",
        ),
        Mutant(
            "falcon: keys and values read before the cache", "falcon",
            {FalconModule: moved(
                FalconAttention, before_cache,
                attention_keys=FalconAttention.attention_keys.at("source.apply_rotary_pos_emb_0.output", select=1),
                attention_values=FalconAttention.attention_values.at("source.value_states_1.output", select=None),
            )},
            "scores_are_queries_against_keys", "keys read before the cache", before_cache,
        ),
        Mutant(
            "llama: pattern read before its cast, under bfloat16", "llama",
            {LlamaAttention: moved(Attention, "before the cast", attention_probabilities=Attention.attention_probabilities.at(SOFTMAX))},
            "head_outputs_are_pattern_against_values", "mixes torch.float32 with torch.bfloat16",
            "the pattern read at the float32 softmax, before .to(query.dtype): equal in float32, a rounding apart in bfloat16",
            load={"dtype": torch.bfloat16},
        ),
        Mutant(
            "granite_swa: ungated head outputs written back seq first", "granite_swa",
            {GraniteSWAModule: moved(GraniteSWAAttention, seq_first_back, ungated_head_outputs=_without_write_back(GraniteSWAAttention.ungated_head_outputs))},
            "assigning_what_was_read_changes_nothing", "ungated_head_outputs, assigned what it reads", seq_first_back,
        ),
        Mutant(
            "gemma2: mlp_norm_output keyed on post_attention_layernorm", "gemma2",
            {Gemma2DecoderLayer: moved(gemma_layer, "Llama's naming on Gemma's sandwich", mlp_norm_output=Layer.mlp_norm_output.at("post_attention_layernorm.output"))},
            "norm_outputs_feed_the_sublayers", "mlp_norm_output against",
            "Llama's naming on Gemma 2, where post_attention_layernorm follows the attention and pre_feedforward_layernorm feeds the MLP",
        ),
    ]


def catalogue() -> list[Mutant]:
    """The project's mutants: the standard ones on each of ``STANDARD_CHECKPOINTS``, the multi-stream ones on each of
    ``MULTI_STREAM_CHECKPOINTS``, the families' own, then the hooks path's on each of ``HOOKS_PATH_CHECKPOINTS``, and
    the toolkit table's and cache groups' on each of ``TOOLKIT_CHECKPOINTS``."""
    return (
        [mutant for checkpoint in STANDARD_CHECKPOINTS for mutant in standard_mutants(checkpoint)]
        + [mutant for checkpoint in MULTI_STREAM_CHECKPOINTS for mutant in multi_stream_mutants(checkpoint)]
        + family_mutants()
        + [mutant for checkpoint in HOOKS_PATH_CHECKPOINTS for mutant in hooks_path_mutants(checkpoint)]
        + [mutant for checkpoint in TOOLKIT_CHECKPOINTS for mutant in toolkit_mutants(checkpoint)]
    )


def pytest_generate_tests(metafunc):
    if "mutant" in metafunc.fixturenames:
        mutants = catalogue()
        metafunc.parametrize("mutant", mutants, ids=[mutant.name for mutant in mutants])


def test_the_catalogue_holds_forty_mutants_at_least():
    assert len(catalogue()) >= 40


def test_every_mutant_is_killed_by_its_check(mutant):
    found = killed(mutant)
    assert found.status == "fail" and mutant.message in found.detail, f"{mutant.name} survives {mutant.check} ({mutant.reason}): {found}"
