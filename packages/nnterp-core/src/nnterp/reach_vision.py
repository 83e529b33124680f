"""Why a model type of transformers' image-text-to-text mapping has no nnterp-vision family: what a load and the report say.

Declared here, by the kind of wrapper, so each reason is written once and
reviewed like code, as ``nnterp.reach.KINDS`` is for the causal-LM mapping; a
load that no family serves refuses such a type with its reason
(``nnterp.reach.refuse``), and the kit's ``reach_vision`` reads this table. The
report's vision section reads ``VISION_KINDS`` for every type of the mapping
that no checkpoint serves with a vision tower, in place of the generic
``reach.VISION_NOT_YET``, which a type absent here keeps. Each reason names
what in the type's structure is in the way, or, where the type is a plain diff
of a served family, says so. A type that gains a family leaves this table.
The types whose text model is served while their tower is not (``gemma4``,
``gemma4_unified``, ``got_ocr2``) say why the tower is not mapped.
"""

# --- the image does not enter the text stream as features at token positions --------------------------------------

ENCODER_DECODER = (
    "an encoder-decoder: an encoder reads the image (on Florence-2, T5Gemma 2 and UDOP its features join the prompt's "
    "embeddings in the encoder's input) and the text decoder reads the encoder's output only through cross-attention, "
    "so no image features enter the decoder's stream at token positions"
)
CROSS_ATTENTION = (
    "the image reaches the text only through cross-attention to the tower's (projected or resampled) output "
    "(BLIP's BERT-style text decoder cross-attends in every block, Mllama runs cross-attention decoder layers at "
    "cross_attention_layers, Idefics runs a Flamingo gated cross-attention layer every cross_layer_interval layers), "
    "so no image features enter the stream at token positions"
)
VQ_TOKENS = (
    "image tokens are VQ codes: a VQ-VAE encoder (vqmodel.encode) quantizes the image, the codes are mapped to "
    "vocabulary ids and embedded by the text model's own embed_tokens before the scatter, so the image enters as "
    "token ids; no tower blocks run and no projector maps features"
)
VQ_TOKENS_APERTUS = (
    "image tokens are discrete codes: Apertus 1.5's vision tokenizer (a convolutional encoder with attention blocks, "
    "then an IBQ quantizer taking the argmax over a codebook, kept in float32) turns each image into a grid of codes, "
    "offset by image_token_offset to vocabulary ids and embedded by the text model's own embed_tokens before "
    "Apertus1p5Model.forward's masked_scatter, so no tower blocks run on a patch stream and no projector maps "
    "features (an audio tokenizer does the same for audio); its text model is served as apertus1p5_text"
)
PREPENDED_IMAGE = (
    "no image token: GitModel.forward concatenates the projected CLIP-tower features in front of the (normed) text "
    "embeddings, so the stream grows by the image rows, which attend to each other both ways, and nothing in the "
    "prompt marks them; its text model is served as text (git)"
)
INDEX_WRITTEN_BEFORE_SCALE = (
    "the features are written by index assignment (inputs_embeds[image_embeds_position_mask] = image_embeds) inside "
    "the text transformer's embedding step, at positions an input mask gives rather than image token ids, then "
    "multiplied by embed_scale with sinusoidal positions added, so layers[0]'s input at those rows is not the "
    "features; the text model (Kosmos-2's sub-LN decoder, a type of its own) has no text family, and the projector "
    "resamples the patches to latent queries by cross-attention"
)
QFORMER = (
    "a Q-Former wrapper: num_query_tokens learned queries cross-attend the tower's patches in a BERT-style Q-Former "
    "(InstructBLIP's also reads the prompt as qformer_input_ids; InstructBLIP-Video runs it per frame) and only the "
    "projected query rows are scattered, in the root's forward, into a whole causal LM (OPT) or a seq2seq T5; that "
    "forward runs the tower and the Q-Former unconditionally, so a prompt without an image does not run"
)
ENCODER_FREE = (
    "no vision tower: raw pixel patches are embedded by a projection alone (Fuyu: one nn.Linear, vision_embed_tokens; "
    "Gemma 4 Unified: LayerNorm, Linear, LayerNorm, factorized 2-D position embeddings, then RMSNorm and Linear) and "
    "scattered into the text model's embeddings (Persimmon's, Gemma 4's: both served), so there are no tower blocks, "
    "patch embeddings or tower output to serve, only the mask, the projector and the scattered features"
)
DEEPSTACK_ONLY = (
    "no scatter into the embeddings: the image tokens' embeddings are zeroed (masked_fill) and the text model (a "
    "Granite model of its own) adds features to the stream at the image tokens before each text layer "
    "deepstack_layer_map names, each from a different CLIP layer through its own windowed Q-Former downsampler, so "
    "image_features is no one tensor; the default config does not build (deepstack_layer_map is None)"
)

# --- no image enters a causal text model -----------------------------------------------------------------------------

BLOCK_DIFFUSION = (
    "a block-diffusion model: a Gemma 4 encoder (image features scattered at image tokens there) feeds a bidirectional "
    "decoder that denoises a block of masked tokens over several steps, self-conditioned on the previous step's "
    "logits, so no forward is one causal pass whose logits predict the next token"
)
ACTION_POLICY = (
    "a vision-language-action policy: a PaliGemma backbone (vlm) encodes the images and prompt, and a Gemma action "
    "expert (dit; on PI0.5 every norm of it modulated by the denoising timestep) denoises continuous robot actions by "
    "flow matching while attending to the backbone's keys and values; the output is actions, not token logits"
)
PROTEIN_TEXT = (
    "a protein-language model with no image: a SaProt (ESM) encoder reads protein sequences, a resampler compresses "
    "them to latent queries, and some Llama text layers read them through sequence-aligner cross-attention; "
    "AutoModelForImageTextToText.from_config rejects its config (ValueError: Unrecognized configuration class "
    "EvollaConfig)"
)
TEXT_ONLY_IN_MAPPING = (
    "no image input at all: the mapping names Mistral4ForCausalLM, a text-only DeepSeek-V3 layout (MLA attention, "
    "routed experts) with no tower; the type is in no causal-LM mapping, so the text kit never builds it, though as "
    "text it is a deepseek_v3 diff"
)

# --- the text model is one nnterp does not serve ----------------------------------------------------------------------

SHORT_CONV_TEXT = (
    "its text model is Inkling's (inkling_text, inkling2_text: plain residual short convolutions beside the "
    "attention, and on Inkling 2 block attention residuals), which nnterp does not serve (reach.py says why), so "
    "there is no text side to attach a tower to"
)
LOOPED_SHORT_CONV_TEXT = (
    "its text model (inkling2_loop_text) is Inkling 2's short causal convolution blocks with some layers run "
    "loop_num_passes times per forward, the later passes gated by the previous pass's block states, which no nnterp "
    "component serves yet, so there is no text side to attach a tower to; the wrapper is Inkling 2's"
)
MULTI_STREAM_TEXT = (
    "its text model is a multi-stream residual (DeepSeek-V4's hyper-connections, which StreamLayer serves on "
    "deepseek_v4) with linear-attention and DSA sparse-attention layers, which no text family maps yet"
)
HY_V4_MULTI_STREAM_TEXT = (
    "its text model (hy_v4_vl_text) is HY-V4's multi-stream block, with 3-D M-RoPE, which the hy_v4 family serves "
    "(StreamLayer, unmixed); but its tower is HunYuan-VL's packed SigLIP-block ViT whose per-image merger sits "
    "inside the tower, which no family maps (see hunyuan_vl)"
)
RESIDUAL_GATE_TEXT = (
    "its text model rescales the residual at each sublayer (MuseSparkResidualGate: alpha * residual + beta * "
    "sublayer output, per-channel learned), so no sublayer adds to the stream, as on Beam, and it has no text "
    "family; beside that, its tower is Muse Glimmer's packed MoonViT and an audio tower is scattered at audio tokens"
)
QSA_TEXT = (
    "its text model (qwen4_exp_text) does not build tiny: its QSA indexer divides token_budget by compress_ratio, "
    "which the config leaves None"
)
MISTRAL_LARGE4_TEXT = (
    "the vision side is Mistral 3's (a Pixtral tower, the patch-merger projector, masked_scatter in "
    "MistralLarge4Model.forward, a Mistral3Model subclass), but its text model (mistral_large4_text: GLM-MoE-DSA's "
    "MLA with a DSA indexer and routed experts, plus a learned per-head log-position query scaling) is in no "
    "causal-LM mapping and has no text family"
)
MODALITY_EXPERTS_TEXT = (
    "its text model (ernie4_5_vl_moe_text) routes text tokens and image tokens to separate expert sets "
    "(moe_mm_token_type_ids splits every MoE block in two) under 3-D M-RoPE and has no text family; the tower is "
    "Qwen2-VL's ViT followed by a variable-resolution resampler (spatial then temporal merging) outside it"
)
MUSE_GLIMMER_TEXT = (
    "a Kimi-K2.5 layout (a packed MoonViT tower, Kimi_K25Model's masked_scatter) whose text model "
    "(muse_glimmer_text: Gemma 2's sandwich block with centered RMSNorms, AFMoE-style attention and a weightless "
    "normed embedding) is in no causal-LM mapping and has no text family"
)
MOLMO2 = (
    "a LLaVA layout (masked_scatter in Molmo2Model.forward), but the projector reads several tower layers "
    "concatenated and pools the patches by processor-given index lists (image_token_pooling) with an attention pool, "
    "and its text model (molmo2_text: Llama with OLMo-2's qk-norm, an optional post-norm block, "
    "additional_vocab_size extra embeddings) is in no causal-LM mapping and has no text family"
)
COSMOS3_EDGE = (
    "a Qwen2-VL layout (grid_thw, 3-D M-RoPE, a patch merger outside the tower) around a packed SigLIP2 tower "
    "(cu_seqlens attention over one row of every image's patches) and a text model of its own (cosmos3_edge_text: a "
    "Llama block with a two-projection ReLU-squared MLP, fc1 / fc2) that is in no causal-LM mapping and has no text "
    "family"
)
STEP3P7 = (
    "its text model (step3p5: Laguna-style attention with DeepSeek-V4 experts in a Gemma 3 text model) is in no "
    "causal-LM mapping and has no text family; the tower (a ViT with layer-scaled sublayers and 2-D RoPE ending in "
    "two stride-2 convolutions) and the global-plus-local crop merging in get_image_features are mapped by no family"
)
HUNYUAN_VL = (
    "a Qwen2-VL-style wrapper (grid_thw, masked_scatter in HunYuanVLModel.forward) on a text type of its own "
    "(hunyuan_vl_text: HunYuan dense V1 with multi-axis positions, xdrope_section) that no text family keys, and a "
    "packed SigLIP-block tower whose per-image merger (a convolution, a newline column, begin and end rows) sits "
    "inside the tower, so its output carries rows that are no patch"
)

# --- the tower (or the way its features reach the text) is not mapped -----------------------------------------------

SAM_TOWER = (
    "its tower is SAM's ViTDet: the blocks run on [images, height, width, hidden] grids, most attend inside windows "
    "(window_partition / window_unpartition around the attention) with decomposed relative positions added to the "
    "scores, a convolutional neck ends it and the projector is convolutional; no tower component takes a 2-D grid "
    "stream or windowed attention yet"
)
SAM_TOWER_UNKEYED = (
    "GOT-OCR 2's class (GotOcr2ForConditionalGeneration) under its own config type, so the got_ocr2 family that "
    "serves that class's text model is not keyed to it; its tower is GOT-OCR 2's SAM ViTDet, whose 2-D grid stream "
    "and windowed attention no tower component takes yet"
)
SAM_THEN_ENCODER = (
    "a two-stage tower: SAM's ViTDet (windowed attention on [images, height, width, hidden] grids, a convolutional "
    "neck) whose feature map a second encoder re-encodes (DeepSeek-OCR 2: a Qwen2 decoder over the patches plus "
    "learned queries, the query rows kept; Unlimited-OCR: a CLIP encoder, its output concatenated with the SAM "
    "features per patch), then global and local crops joined by a separator row; the text model (DeepSeek-OCR's "
    "MoE) is in no causal-LM mapping and has no text family"
)
TWO_TOWERS = (
    "two towers: a SigLIP ViT on the low-resolution image and a SAM ViTDet (windowed attention on 2-D grids, a "
    "neck, a learned blend of its global-attention layer) on the high-resolution one, fused per patch by the "
    "aligner; model.vision names one tower"
)
MID_TOWER_MERGER = (
    "a packed SigLIP tower with a window-attention merger inserted after block insert_layer_id, which pools the "
    "patches 4x in the middle of the tower, so the blocks after it run on another grid and no one patch axis spans "
    "the tower's blocks; the text model (qwen3_5_text) is served"
)
GRANITE_DOCLING = (
    "an Idefics3 tower whose connector has two paths (coarse and fine pixel shuffle, chosen per sample by a density "
    "router) plus Qwen3-VL-style DeepStack features from chosen tower layers added after the first text layers, on a "
    "Granite text model of its own (granite_docling_text, with the DeepStack adds): a diff of Idefics3 with "
    "Qwen3-VL's DeepStack, not written yet"
)
DOTS3_TOWER = (
    "a Qwen-ViT layout (packed cu_seqlens attention, grid_thw, the merger inside the tower) with a tower of its own "
    "whose blocks are RMS-normed and partly routed-expert MoE MLPs, beside an audio tower scattered at audio tokens; "
    "the text model (dots3_note_text) is served"
)
RADIO_OMNI = (
    "its tower is RADIO (a ViT with class and register tokens and layer scales), which no family maps; the root's "
    "forward scatters into a whole NemotronHForCausalLM (language_model), prunes video tokens from the sequence after "
    "the scatter (a retention mask) and scatters an audio tower's features beside the image's"
)
SPLIT_PROJECTOR = (
    "the projector is split across two modules: the tower's own head (head_linear, head_norm, then a softmax over a "
    "visual vocabulary) and the wrapper's visual_embeddings_table, which multiplies that distribution into an "
    "embedding table; Ovis2Model.forward scatters the result and then overwrites the visual indicator tokens' rows "
    "from the same table, so no one module is the projector; the tower is AIMv2-style and the text model Qwen2 "
    "(served)"
)
OMNI_THINKER = (
    "an omni thinker: a Qwen2.5-VL layout (Qwen3-Omni: Qwen3-VL-MoE's, with DeepStack) beside an audio tower whose "
    "features are scattered at audio tokens in the same forward, under TMRoPE positions (3-D, aligned in time across "
    "audio and video); Qwen2.5-Omni's tower attention projects q, k and v separately; a diff of the Qwen-VL families "
    "plus the audio tower, not written yet"
)
GEMMA4_TOWER = (
    "its tower (Gemma4VisionModel) is a ViT of its own: Gemma's sandwich block (each sublayer's output RMS-normed "
    "before the add), 2-D RoPE over pixel_position_ids with padding patches masked out, and a pooler that averages "
    "patches by position into pooling_kernel_size-square cells, scales them (and standardizes them where "
    "config.standardize) and drops the padding rows before embed_vision projects them; no component maps that "
    "block or pooler yet, and an audio tower is scattered beside it"
)

# --- plain diffs of a served family: not written yet ----------------------------------------------------------------

GEMMA3_RENAMED = (
    "Gemma 3's class under the ShieldGemma 2 config type, which does not load as a generator: transformers' weight "
    "conversion for shieldgemma2 (meant for ShieldGemma2ForImageClassification) prefixes every key with model., so "
    "the Gemma3ForConditionalGeneration image-text-to-text builds loads its text model's weights as unexpected and "
    "keeps it random, and a checkpoint it saves does not load back; its processor also writes its own policy prompts"
)
ALTUP_TEXT = (
    "its text model is gemma3n_text's AltUp block (served: layer_input is [batch, seq, num_streams, hidden_size]), "
    "where the image features land in stream 0 alone and the other streams are its altup_projections, so the image "
    "values would be proven against layers[0].layer_input[..., 0, :], which the vision kit does not read yet; the "
    "tower (timm's MobileNetV5, its output width fixed at 2048 by timm) and the embed_vision projector, which runs "
    "twice per forward (on the image token ids, then on the features), would map"
)
PACKED_CLIP_LLAVA = (
    "a LLaVA wrapper (MiniMaxM3VLModel subclasses LlavaModel: masked_scatter) on a packed CLIP-block tower (every "
    "image's patches on one [1, patches, hidden] row, attention per image over cu_seqlens, 3-D RoPE) and a "
    "MiniMax-M3 text model (served as minimax_m3_vl_text): a diff of LLaVA with the Qwen ViT's packed per-image "
    "attention handling; not written yet"
)

#: each reason and the image-text-to-text model types it keeps out of reach
VISION_KINDS: dict[str, tuple[str, ...]] = {
    ENCODER_DECODER: ("florence2", "pix2struct", "pp_formulanet", "t5gemma2", "udop", "vision-encoder-decoder"),
    CROSS_ATTENTION: ("blip", "idefics", "mllama"),
    VQ_TOKENS: ("chameleon", "emu3"),
    VQ_TOKENS_APERTUS: ("apertus1p5",),
    PREPENDED_IMAGE: ("git",),
    INDEX_WRITTEN_BEFORE_SCALE: ("kosmos-2", "kosmos-2.5"),
    QFORMER: ("blip-2", "instructblip", "instructblipvideo"),
    ENCODER_FREE: ("fuyu", "gemma4_unified"),
    DEEPSTACK_ONLY: ("granite4_vision",),
    BLOCK_DIFFUSION: ("diffusion_gemma",),
    ACTION_POLICY: ("pi0", "pi05"),
    PROTEIN_TEXT: ("evolla",),
    TEXT_ONLY_IN_MAPPING: ("mistral4",),
    # lfm2_vl and lfm3_vl: their text models are served (nnterp-recurrent's lfm2, lfm3), their towers not yet mapped
    SHORT_CONV_TEXT: ("inkling2", "inkling_mm_model"),
    LOOPED_SHORT_CONV_TEXT: ("inkling2_loop",),
    MULTI_STREAM_TEXT: ("glm5_next",),
    HY_V4_MULTI_STREAM_TEXT: ("hy_v4_vl",),
    RESIDUAL_GATE_TEXT: ("muse_spark",),
    QSA_TEXT: ("qwen4_exp",),
    MISTRAL_LARGE4_TEXT: ("mistral_large4",),
    MODALITY_EXPERTS_TEXT: ("ernie4_5_vl_moe",),
    MUSE_GLIMMER_TEXT: ("muse_glimmer",),
    MOLMO2: ("molmo2",),
    COSMOS3_EDGE: ("cosmos3_edge",),
    STEP3P7: ("step3p7",),
    HUNYUAN_VL: ("hunyuan_vl",),
    SAM_TOWER: ("got_ocr2",),
    SAM_TOWER_UNKEYED: ("pp_chart2table",),
    SAM_THEN_ENCODER: ("deepseek_ocr2", "unlimited_ocr"),
    TWO_TOWERS: ("deepseek_vl_hybrid",),
    MID_TOWER_MERGER: ("minicpm_ocr", "minicpmv4_6", "minicpmv4_7"),
    GRANITE_DOCLING: ("granite_docling",),
    DOTS3_TOWER: ("dots3_note",),
    RADIO_OMNI: ("nemotron_h_omni",),
    SPLIT_PROJECTOR: ("ovis2",),
    OMNI_THINKER: ("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker"),
    GEMMA4_TOWER: ("gemma4",),
    GEMMA3_RENAMED: ("shieldgemma2",),
    ALTUP_TEXT: ("gemma3n",),
    PACKED_CLIP_LLAVA: ("minimax_m3_vl",),
}
