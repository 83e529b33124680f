"""The tiny checkpoints of the vision-language families: light, ``TinyConfig`` only."""

from nnterp.tiny import TinyConfig
from nnterp_recurrent.checkpoints import DELTANET

from .tiny import (
    VisionTinyConfig,
    aria,
    aya_vision,
    cohere2_vision,
    deepseek_vl,
    fast_vlm,
    gemma3,
    glm4v,
    glmga,
    idefics2,
    idefics3,
    internvl,
    janus,
    kimi_k25,
    llama4,
    llava_onevision,
    paddleocr_vl,
    paligemma,
    perception_lm,
    qianfan_ocr,
    video_llama_3,
)
from .tiny.lighton_ocr import LightOnOcrTinyConfig
from .tiny.llava_next import LlavaNextTinyConfig
from .tiny.llava_next_video import LlavaNextVideoTinyConfig
from .tiny.mistral3 import PixtralTinyConfig
from .tiny.qwen2_vl import QwenVLTinyConfig
from .tiny.qwen3_vl import Qwen3VLTinyConfig
from .tiny.video_llava import VideoLlavaTinyConfig
from .tiny.vipllava import VipLlavaTinyConfig

#: the text model: the sizes every tiny checkpoint shares
TEXT = {
    "model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256,
    "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0,
}
#: a CLIP tower on 32-pixel images in 8-pixel patches: 16 patches and the class row
CLIP = {
    "model_type": "clip_vision_model", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "image_size": 32, "patch_size": 8,
}

#: a Pixtral tower: any resolution up to 48 pixels a side, in 4-pixel patches (the checks' 40x48 image: 10x12 patches)
PIXTRAL = {
    "model_type": "pixtral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "head_dim": 16, "image_size": 48, "patch_size": 4,
}
#: the Qwen processors' tokens follow the tokenizer's 300 entries (image, video, vision start, vision end)
QWEN_TOKENS = {"image_token_id": 300, "video_token_id": 301, "vision_start_token_id": 302, "vision_end_token_id": 303}
#: Qwen2's text model on 3D rotary positions: mrope_section sums to head_dim // 2
QWEN_TEXT = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}}
QWEN2_VL_VIT = {
    "depth": 2, "embed_dim": 64, "hidden_size": 64, "num_heads": 4, "mlp_ratio": 2, "patch_size": 8,
    "spatial_merge_size": 2, "temporal_patch_size": 2,
}
QWEN2_5_VL_VIT = {
    "depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 4, "patch_size": 8, "spatial_merge_size": 2,
    "temporal_patch_size": 2, "window_size": 32, "out_hidden_size": 64, "fullatt_block_indexes": [1],
}
#: Qwen3-VL's text model: interleaved 3D rotary positions; mrope_section sums to head_dim // 2
QWEN3_TEXT = {"head_dim": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True}}
#: Qwen3.5's text model: nnterp-recurrent's gated DeltaNet sizes, a quarter of each 32-wide head rotated, in 3D
QWEN3_5_TEXT = {
    **DELTANET, "head_dim": 32,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1], "mrope_interleaved": True},
}
#: Cohere Compass's processor tokens, in the order the tokenizer gains them, and the config fields naming their ids
COMPASS_TOKENS = {
    "<|IMAGE_PAD|>": "image_token_id", "<|VIDEO_PAD|>": "video_token_id",
    "<|VISION_START|>": "vision_start_token_id", "<|VISION_END|>": "vision_end_token_id",
}
COMPASS_TOKEN_IDS = {field: 300 + index for index, field in enumerate(COMPASS_TOKENS.values())}
#: the learned position grid must be square (4 x 4); block 0 feeds the one DeepStack merger
QWEN3_VL_VIT = {
    "depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 4, "patch_size": 8, "spatial_merge_size": 2,
    "temporal_patch_size": 2, "out_hidden_size": 64, "num_position_embeddings": 16, "deepstack_visual_indexes": [0],
}

TINY_CONFIGS = {
    # the image token follows the tokenizer's 300 entries; 16 image tokens, one per patch (the class row dropped)
    "llava": VisionTinyConfig(
        "llava",
        {"text_config": TEXT, "vision_config": CLIP, "image_token_id": 300, "image_seq_length": 16},
        load={"attn_implementation": "eager"},
    ),
    # anyres: a base crop and the 2x2 tiles of 64x64 for the checks' 40x48 image; 70 image tokens
    "llava_next": LlavaNextTinyConfig(
        "llava_next",
        {"text_config": TEXT, "vision_config": CLIP, "image_token_id": 300, "image_grid_pinpoints": [[32, 64], [64, 32], [64, 64]]},
        load={"attn_implementation": "eager"},
    ),
    # two tower layers side by side into the projector (hidden_states[-2] and [0]); 16 image tokens
    "vipllava": VipLlavaTinyConfig(
        "vipllava",
        {"text_config": TEXT, "vision_config": CLIP, "image_token_id": 300, "image_seq_length": 16, "vision_feature_layer": [-2, 0]},
        load={"attn_implementation": "eager"},
    ),
    "paligemma": paligemma.TINY,
    "gemma3": gemma3.TINY,
    "idefics3": idefics3.TINY,
    "smolvlm": idefics3.SMOLVLM,
    # [IMG] is id 300; 10x12 patches merged 2x2 into 30 image tokens
    "mistral3": PixtralTinyConfig(
        "mistral3",
        {"text_config": {**TEXT, "model_type": "mistral"}, "vision_config": PIXTRAL, "image_token_id": 300, "spatial_merge_size": 2},
        load={"attn_implementation": "eager"},
    ),
    # LLaVA on a Pixtral tower (Pixtral 12B): [IMG] is id 300; 10x12 patches, one image token each (no merge)
    "llava_pixtral": PixtralTinyConfig(
        "llava",
        {
            "text_config": {**TEXT, "model_type": "mistral"}, "vision_config": PIXTRAL, "image_token_id": 300,
            "vision_feature_layer": -1, "vision_feature_select_strategy": "full",
        },
        load={"attn_implementation": "eager"},
    ),
    # the checks' image: 4x6 patches, 6 image tokens; Qwen2.5-VL's block 0 attends in 32-pixel windows
    "qwen2_vl": QwenVLTinyConfig("qwen2_vl", {"text_config": QWEN_TEXT, "vision_config": QWEN2_VL_VIT, **QWEN_TOKENS}),
    "qwen2_5_vl": QwenVLTinyConfig("qwen2_5_vl", {"text_config": QWEN_TEXT, "vision_config": QWEN2_5_VL_VIT, **QWEN_TOKENS}),
    # the checks' image: 4x6 patches, 6 image tokens; tower block 0's DeepStack merger is added after text layer 0
    "qwen3_vl": Qwen3VLTinyConfig(
        "qwen3_vl", {"text_config": QWEN3_TEXT, "vision_config": QWEN3_VL_VIT, **QWEN_TOKENS}, load={"attn_implementation": "eager"}
    ),
    # Qwen3-VL's tower without DeepStack over gated DeltaNet blocks; 6 image tokens for the checks' image
    **{
        model_type: Qwen3VLTinyConfig(
            model_type,
            {"text_config": QWEN3_5_TEXT, "vision_config": {k: v for k, v in QWEN3_VL_VIT.items() if k != "deepstack_visual_indexes"}, **QWEN_TOKENS},
            load={"attn_implementation": "eager"},
        )
        for model_type in ("qwen3_5", "qwen3_5_moe")
    },
    # Qwen2.5-VL's tower, a linear projector after its merger, a HyperCLOVA X text model (its multipliers away from 1)
    "hyperclovax_vision_v2": QwenVLTinyConfig(
        "hyperclovax_vision_v2",
        {
            "text_config": {**TEXT, "model_type": "hyperclovax", "residual_multiplier": 0.7, "logits_scaling": 0.5, "embedding_multiplier": 1.3},
            "vision_config": QWEN2_5_VL_VIT, **QWEN_TOKENS,
        },
        load={"attn_implementation": "eager"},
    ),
    # Qwen2.5-VL's tower with two key/value heads for four query heads, over an EXAONE 4 text model
    "exaone4_5": QwenVLTinyConfig(
        "exaone4_5",
        {"text_config": {**TEXT, "model_type": "exaone4"}, "vision_config": {**QWEN2_5_VL_VIT, "num_key_value_heads": 2}, **QWEN_TOKENS},
        load={"attn_implementation": "eager"},
    ),
    # every image resized to 980 pixels: 14 x 14 patches of 70, pooled into 4 learned queries; Aria's MoE text model
    "aria": aria.TINY,
    # Cohere Compass: Qwen3-VL's tower and DeepStack (its own processor and tokens) over a Cohere text model; 6 image tokens
    "cohere_compass": glm4v.Glm4vTinyConfig(
        "cohere_compass",
        {
            # rope parameters per layer type; 3D positions over each 16-wide head, interleaved as on Qwen3-VL
            "text_config": {"head_dim": 16, "logit_scale": 0.5, "rope_parameters": {"full_attention": QWEN3_TEXT["rope_parameters"]}},
            "vision_config": QWEN3_VL_VIT,
            **COMPASS_TOKEN_IDS,
        },
        pixels=(16 * 16 * 4, 48 * 48),
        processor=("cohere_compass", "CohereCompass"),
        tokens=tuple(COMPASS_TOKENS.items()),
    ),
    # the checks' image resized to 32 x 32: 16 patches (and a class row, last), pixel-shuffled into 4 image tokens
    "llama4": llama4.TINY,
    # wrappers in transformers' causal-LM mapping whose text model is served (their towers are not mapped yet)
    **{model_type: TinyConfig(model_type) for model_type in ("gemma4", "gemma4_unified", "got_ocr2")},
    # Qwen3-VL's tower on a Qwen3-MoE text model (4 experts, top 2; num_experts is an alias, so not shrunk): 6 image tokens
    "qwen3_vl_moe": Qwen3VLTinyConfig(
        "qwen3_vl_moe",
        {"text_config": {**QWEN3_TEXT, "num_experts": 4}, "vision_config": QWEN3_VL_VIT, **QWEN_TOKENS},
        load={"attn_implementation": "eager"},
    ),
    # Aya Vision: the checks' image cut into 4 tiles and a thumbnail of 16 x 16, 4 image tokens each (4 x 4 patches shuffled by 2)
    "aya_vision": aya_vision.TINY,
    # PerceptionLM: a timm PE tower on 32-pixel tiles (a thumbnail and one tile per image), 8 image tokens per image
    "perception_lm": perception_lm.TINY,
    "glm4v": glm4v.TINY,
    # LightOnOCR: Mistral 3's tower and merger on a Qwen3 text model; the checks' image is 10 x 12 patches, 30 image tokens
    "lighton_ocr": LightOnOcrTinyConfig(
        "lighton_ocr",
        {"text_config": {**TEXT, "model_type": "qwen3"}, "vision_config": PIXTRAL, "image_token_id": 300, "spatial_merge_size": 2},
        load={"attn_implementation": "eager"},
    ),
    "glm4v_moe": glm4v.TINY_MOE,
    # Command A Vision: Aya Vision's tiling and shuffle; the checks' image is 4 tiles and a thumbnail, 4 image tokens each
    "cohere2_vision": cohere2_vision.TINY,
    "glm46v": glm4v.TINY_46V,
    # FastVLM: a timm FastViT tower, every image 128 pixels, its 2 x 2 last feature map 4 image tokens
    "fast_vlm": fast_vlm.TINY,
    # InternVL: an InternViT on 16-pixel crops (the checks' image: 4 tiles and a thumbnail), 4 image tokens each
    "internvl": internvl.TINY,
    # LLaVA-OneVision: the checks' image is a base crop and 2 x 2 tiles of 32 x 32, 70 image tokens; two in a prompt, 17 each
    "llava_onevision": llava_onevision.TINY,
    # LLaVA-NeXT-Video: LLaVA-NeXT's checkpoint with a video token (301) and processor; the checks' image is 70 image tokens
    "llava_next_video": LlavaNextVideoTinyConfig(
        "llava_next_video",
        {
            "text_config": TEXT, "vision_config": CLIP, "image_token_id": 300, "video_token_id": 301,
            "image_grid_pinpoints": [[32, 64], [64, 32], [64, 64]],
        },
        load={"attn_implementation": "eager"},
    ),
    # Cosmos 3: Qwen3-VL's tower, DeepStack and text model under its own config type; 6 image tokens for the checks' image
    "cosmos3_omni": Qwen3VLTinyConfig(
        "cosmos3_omni",
        {
            # its nested configs are declared through AutoConfig, so not shrunk: the text model's sizes given whole
            "text_config": {**TEXT, **QWEN3_TEXT, "model_type": "qwen3_vl_text"},
            "vision_config": {**QWEN3_VL_VIT, "model_type": "qwen3_vl_vision"},
            **QWEN_TOKENS,
        },
        load={"attn_implementation": "eager"},
    ),
    # GLM-4.6V on GLM-4.5V's MoE text model: served by glm46v_moe, which glm46v.for_config names
    "glm46v_moe": glm4v.TINY_46V_MOE,
    "paddleocr_vl": paddleocr_vl.TINY,
    # DeepSeek-VL: a SigLIP tower's 16 patches through an MLP aligner, 16 image tokens per image
    "deepseek_vl": deepseek_vl.TINY,
    "video_llama_3": video_llama_3.TINY,
    # Video-LLaVA: LLaVA on its image tower (the video tower beside it); 16 image tokens per image, the class row dropped
    "video_llava": VideoLlavaTinyConfig(
        "video_llava",
        {"text_config": TEXT, "vision_config": CLIP, "image_token_index": 300, "video_token_index": 301, "image_seq_length": 16},
        load={"attn_implementation": "eager"},
    ),
    # Janus: a SigLIP-layout tower's 16 patches through an MLP aligner, 16 image tokens per image (a small VQ-VAE beside it)
    "janus": janus.TINY,
    # Idefics2: Idefics3's tower layout, its 16 patches resampled to 4 latents per image, 4 image tokens
    "idefics2": idefics2.TINY,
    # GLMGA: GLM-4.6V's checkpoint under its own config type and image processor; 6 image tokens
    "glmga": glmga.TINY,
    # Qianfan-OCR: InternVL's tiny tower and tiling on a Qwen3 text model; 4 image tokens per crop
    "qianfan_ocr": qianfan_ocr.TINY,
    # GLM-OCR: GLM-4.1V's tiny tower (q and k norms, no learned positions) and processor; 6 image tokens
    "glm_ocr": glm4v.Glm4vTinyConfig("glm_ocr", {"text_config": glm4v.GLM4V_TEXT, "vision_config": glm4v.GLM4V_VIT, **glm4v.GLM_TOKEN_IDS}),
    # Kimi-K2.5: a MoonViT on 8-pixel patches (the checks' image padded to 6 x 6), 2 x 2 pooled into 9 image tokens; DeepSeek-V3 text
    "kimi_k25": kimi_k25.TINY,
}
