"""The tiny checkpoints of the vision-language families: light, ``TinyConfig`` only."""

from .tiny import VisionTinyConfig

#: the text model: the sizes every tiny checkpoint shares (a wrapper's nested configs are not shrunk for it)
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

TINY_CONFIGS = {
    # the image token follows the tokenizer's 300 entries; 16 image tokens, one per patch (the class row dropped)
    "llava": VisionTinyConfig(
        "llava",
        {"text_config": TEXT, "vision_config": CLIP, "image_token_id": 300, "image_seq_length": 16},
        load={"attn_implementation": "eager"},
    ),
}
