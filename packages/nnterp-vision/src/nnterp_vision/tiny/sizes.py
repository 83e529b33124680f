"""The sizes several tiny checkpoints share: text models, towers and processor tokens, as config fields.

Plain dictionaries, light on purpose: the families' ``tiny`` checkpoints are
built from them, and nothing is imported until a checkpoint is written.
"""

#: the text model's sizes without head_dim (a config deriving it keeps None) or bos and eos tokens (GLM-4V's has none)
TEXT_SIZES = {
    "vocab_size": 320,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "pad_token_id": 0,
}
#: the text model: the sizes every tiny checkpoint shares
TEXT = {"model_type": "llama", **TEXT_SIZES, "head_dim": 16, "bos_token_id": 0, "eos_token_id": 0}
#: the text model as Qwen2 (LLaVA-OneVision's, InternVL's)
QWEN2 = {**TEXT, "model_type": "qwen2"}
#: the text model as Qwen2, head_dim derived (None in the config): FastVLM's, VideoLLaMA3's (built whole, by AutoConfig)
QWEN2_SIZED = {"model_type": "qwen2", **TEXT_SIZES, "bos_token_id": 0, "eos_token_id": 0}
#: a tower on 32-pixel images in 8-pixel patches: 16 patches (4 x 4) at the text width (Idefics2's, no model type named)
TOWER = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 32,
    "patch_size": 8,
}
#: a SigLIP tower: no class row, no pooling head
SIGLIP = {"model_type": "siglip_vision_model", **TOWER, "vision_use_head": False}
#: a CLIP tower: the 16 patches and the class row
CLIP = {"model_type": "clip_vision_model", **TOWER}

#: a Pixtral tower: any resolution up to 48 pixels a side, in 4-pixel patches (the checks' 40x48 image: 10x12 patches)
PIXTRAL = {
    "model_type": "pixtral",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "head_dim": 16,
    "image_size": 48,
    "patch_size": 4,
}
#: the Qwen processors' tokens follow the tokenizer's 300 entries (image, video, vision start, vision end)
QWEN_TOKENS = {"image_token_id": 300, "video_token_id": 301, "vision_start_token_id": 302, "vision_end_token_id": 303}
#: Qwen2's text model on 3D rotary positions: mrope_section sums to head_dim // 2
QWEN_TEXT = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}}
QWEN2_VL_VIT = {
    "depth": 2,
    "embed_dim": 64,
    "hidden_size": 64,
    "num_heads": 4,
    "mlp_ratio": 2,
    "patch_size": 8,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}
#: a Qwen ViT at the text width, merging 2 x 2 patches; without frames in depth or windows (LLaVA-OneVision-1.5's)
QWEN_VIT = {
    "depth": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 4,
    "patch_size": 8,
    "spatial_merge_size": 2,
    "out_hidden_size": 64,
}
QWEN2_5_VL_VIT = {**QWEN_VIT, "temporal_patch_size": 2, "window_size": 32, "fullatt_block_indexes": [1]}
#: Qwen3-VL's text model: interleaved 3D rotary positions; mrope_section sums to head_dim // 2
QWEN3_TEXT = {
    "head_dim": 16,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "mrope_section": [2, 3, 3],
        "mrope_interleaved": True,
    },
}
#: a gated DeltaNet mixer: two key heads of 8 shared by four value heads (nnterp-recurrent's tiny sizes)
DELTANET = {
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
}
#: Qwen3.5's text model: the gated DeltaNet sizes, a quarter of each 32-wide head rotated, in 3D
QWEN3_5_TEXT = {
    **DELTANET,
    "head_dim": 32,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.25,
        "mrope_section": [2, 1, 1],
        "mrope_interleaved": True,
    },
}
#: the learned position grid must be square (4 x 4); block 0 feeds the one DeepStack merger
QWEN3_VL_VIT = {**QWEN_VIT, "temporal_patch_size": 2, "num_position_embeddings": 16, "deepstack_visual_indexes": [0]}
