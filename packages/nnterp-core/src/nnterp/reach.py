"""Why nnterp keeps a model type out of reach, by kind: what a load refuses it with, and what the kit's report says.

A type no family serves, by its type or its classes, is otherwise served by a
family inferred from its module tree and proven at load (``nnterp.inference``).
The types here have a structure under which the standard values would mean
nothing one can state (a looped block, a stream no sublayer adds to, a scan the
components do not read), so a load refuses them with the reason written here
(``refuse``, raising ``OutOfReach``) rather than serve what a proof would
withdraw::

    StandardizedTransformer("some/xlstm")   # OutOfReach: no nnterp family exists yet for model type 'xlstm' ...

Declared by the kind of model, so each reason is written once and reviewed like
code; the conformance kit's records (``nnterp_conformance.reach``) read these
tables, and ``nnterp.reach_vision`` holds those of the image-text-to-text
mapping. A type served by a family never reaches them (or is served first).
"""

from __future__ import annotations

from .errors import FamilyNotFound

ENCODER_DECODER = "an encoder-decoder: its causal-LM class is the decoder half, with cross-attention to an encoder"
AUDIO = "an audio model: its causal LM decodes audio codes or transcripts"
ZAMBA = (
    "its Mamba-1 mixer runs the scan once per head in a Python loop, each head with its own B and C, so one "
    "forward makes a kernel call per head, which SelectiveScan does not gather; not mapped yet"
)
INKLING_CONV = (
    "Inkling's blocks: every block is softmax attention whose scores add a learned relative-position bias "
    "(r_proj, rel_logits_proj) and whose keys and values pass through short causal convolutions (k_sconv, v_sconv), "
    "and each sublayer's output passes through another (attn_sconv, mlp_sconv: conv(x) + x) before the block adds "
    "it; these convs are plain residual ones beside the attention, not LFM2's gated mixer in its place, so "
    "ShortConvolution does not serve them: serving it needs an ungated short-conv component for the four windows "
    "(conv_idx 0-3), the contributions read at attn_sconv and mlp_sconv, and the position bias as the scores' bias"
)
INKLING2_BLOCK_RESIDUALS = (
    "Inkling 2's blocks feed each sublayer a mix of earlier blocks' states (block attention residuals: "
    "attention_input and mlp_input attend over block_states), and a block at a block boundary drops its residual "
    "(the stream after its attention is the attention's output alone), so layer_input + attention_output + "
    "mlp_output is not layer_output; its convs are plain residual ones after each sublayer, not LFM2's gated "
    "mixer: serving it needs the block-state mixing as terms of the block's sum"
)
WKV = (
    "RWKV's wkv keeps per channel a numerator, a denominator and a running max that stabilizes both (the stored two are "
    "scaled by exp(-max)) and reads their ratio, o = (e1 * num + e2 * v) / (e1 * den + e2): no one state read by a query, "
    "and no rule the kit states; the state travels as state= (five [batch, hidden, layers] tensors, the two token-shift "
    "states among them) and returns as output.state, not cache=/output.cache, which the continuation checks hand on; and "
    "block 0 normalizes its input inside the block (pre_ln), so its sublayers do not add to its layer_input. Serving it "
    "needs a wkv component over (num, den, max), a 'wkv' rule in nnterp_conformance.recurrences, continuation by state=, "
    "and block 0's pre_ln as a term of its sum"
)
MLSTM = (
    "xLSTM's mLSTM keeps per head a matrix C, a normalizer n and a running max m that stabilizes both (the stored C and n "
    "are scaled by exp(-m)) and reads h = q C / max(|q . n|, exp(-m)), a normalized read no rule of the kit states; "
    "transformers defines the block, its kernels and their module paths otherwise when the external xlstm package is "
    "installed; a prompt runs the chunkwise kernel, which holds the states only at chunk boundaries, and one longer than "
    "max_inference_chunksize runs every block once per chunk in one forward. Serving it needs an mLSTM component over "
    "(C, n, m), an 'mlstm' rule, the native sequence kernel routed for per-token states, and values addressed per chunk"
)
QSA = "does not build tiny: its QSA indexer divides token_budget by compress_ratio, which the config leaves None"
VISION = "a vision-language wrapper: nnterp-vision's issue (its text model is served where it has a type of its own)"
XLNET = (
    "a post-LN block with relative-position attention of its own (rel_attn_core: content, position and segment "
    "scores, two streams when a target mapping is given, memories carried across calls), which no family maps yet"
)
LOOPED_SHORT_CONV = (
    "Inkling 2's blocks (a short causal convolution after each sublayer, post_attention_convolution and "
    "post_mlp_convolution, with block attention residuals over earlier blocks' summed states), which no component "
    "serves yet, and the layers from loop_layer_index_start to loop_layer_index_end run loop_num_passes times per "
    "forward (3 by default), each later pass restarting from the pre-loop stream and mixing the previous pass's "
    "block states into its queries, keys, values and MLP input through message gates, so a value read on a looped "
    "block is one of several calls; serving it needs the conv mixer, then values addressed per pass"
)
ASSISTANT = (
    "does not build: the class default config fails its own validation (a KV-sharing assistant); and a drafter: "
    "its forward reads the backbone's inputs_embeds and shared KV states, so it does not run on a prompt alone"
)

#: each reason and the causal-LM model types it keeps out of reach
KINDS: dict[str, tuple[str, ...]] = {
    ENCODER_DECODER: (
        "bart",
        "bigbird_pegasus",
        "blenderbot",
        "blenderbot-small",
        "marian",
        "mbart",
        "mvp",
        "pegasus",
        "plbart",
        "prophetnet",
        "trocr",
        "whisper",
    ),
    AUDIO: ("musicgen", "musicgen_melody", "moss_transcribe_diarize"),
    ZAMBA: ("zamba",),
    INKLING_CONV: ("inkling_text",),
    INKLING2_BLOCK_RESIDUALS: ("inkling2_text",),
    WKV: ("rwkv",),
    MLSTM: ("xlstm",),
    QSA: ("qwen4_exp", "qwen4_exp_text"),
    VISION: ("fuyu", "gemma3n", "mllama", "dots3_note"),
    XLNET: ("xlnet",),
    LOOPED_SHORT_CONV: ("inkling2_loop_text",),
    ASSISTANT: ("gemma4_assistant", "gemma4_unified_assistant"),
}

#: why a model type of the image-text-to-text mapping has no vision checkpoint yet
VISION_NOT_YET = (
    "no nnterp-vision family yet: its tower, its projector and where its image features enter the text model "
    "are not mapped (nnterp-vision's issue)"
)

#: the reasons that are about a recurrent or hybrid mixer: the report's recurrent section lists their types
RECURRENT_KINDS = (ZAMBA, INKLING_CONV, INKLING2_BLOCK_RESIDUALS, LOOPED_SHORT_CONV, WKV, MLSTM, QSA)

#: types whose own structure keeps a standard value from meaning one thing, each with what is in the way
STRUCTURE: dict[str, str] = {
    "blt": (
        "three stacks: the global transformer runs over patches, not tokens, and the byte decoder has "
        "cross-attention between its layers, so no one block list carries the token stream"
    ),
    "hrm_text": (
        "a hierarchical recurrent model: each block runs several times per forward (H_cycles x L_cycles), "
        "so a value read on a block is one of several calls, and the logits come from the last"
    ),
    "xlm": (
        "no block module: XLMModel keeps its sublayers in parallel ModuleLists (attentions, layer_norm1, ffns, "
        "layer_norm2) and runs block i inline in its forward, so no module's input and output are a block's streams"
    ),
    "reformer": (
        "a reversible residual: each block carries two streams (the attention adds to one, the feed-forward to the "
        "other) concatenated on the hidden axis, so no one tensor is the stream"
    ),
    "dory": (
        "an nGPT block on the unit sphere: the block overwrites the stream with its L2-normalized input (no residual "
        "is kept) and moves it toward each sublayer's normalized output at a learned per-channel rate (h + "
        "|lambda| * (out - h)), so no sublayer adds to the stream; and the layers from n_input_layers on "
        "(n_recurrent_layers of them) run n_recurrent_loops times per forward (2 by default), each pass starting "
        "from norm(stream) + the normalized stream that entered the loop, so a value read on a looped block is one "
        "of several calls and the stream between passes is mixed outside any block; serving it needs values "
        "addressed per pass (hrm_text's cycles need the same) and contributions declared unavailable, as on Beam"
    ),
    "cpmant": (
        "not mapped yet: a pre-LN block, but every stream starts with prompt_length learned prompt tokens before the "
        "input, its mask is bidirectional, and token id 0 is padding"
    ),
}

#: reasons about the kit's tiny checkpoints, not about the type's structure: a load infers and proves such a type as any other
TINY_ONLY = (QSA,)

#: the reason for each causal-LM type this table knows
REASONS: dict[str, str] = {
    **{model_type: reason for reason, types in KINDS.items() for model_type in types},
    **STRUCTURE,
}


class OutOfReach(FamilyNotFound):
    """A model type nnterp keeps out of reach, refused at load with why (``model_type``, ``reason``) and what to do."""

    def __init__(self, model_type: str, reason: str) -> None:
        self.model_type, self.reason = model_type, reason
        super().__init__(
            f"no nnterp family exists yet for model type {model_type!r}, and nnterp keeps it out of reach rather than "
            f"infer one from its module tree: {reason}. Standard values on it would have no one meaning, so nothing is "
            "loaded. To use it, write a family that serves it (docs/adding-a-family.md) and register it under the "
            "'nnterp.families' entry-point group, or pass family= (an nnterp Family) to StandardizedTransformer; "
            "nnsight's LanguageModel loads it without nnterp's names"
        )


def reason(model_type: str) -> str | None:
    """Why ``model_type`` is out of reach, None where no table knows it: the image-text-to-text table's reason for a
    wrapper (more specific than ``VISION``), else the causal-LM table's."""
    from .reach_vision import VISION_KINDS

    wrapper = next((why for why, model_types in VISION_KINDS.items() if model_type in model_types), None)
    found = REASONS.get(model_type)
    return wrapper if found in (None, VISION) and wrapper else found


def refuse(model_type: str) -> None:
    """Raise ``OutOfReach`` for a type the tables keep out of reach by its structure; the caller has found no family serving it."""
    why = reason(model_type)
    if why is not None and why not in TINY_ONLY:
        raise OutOfReach(model_type, why)
