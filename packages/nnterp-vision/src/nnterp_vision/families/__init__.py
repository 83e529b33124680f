"""One module per vision-language family; ``SERVED`` is the table the ``nnterp.families`` entry point names."""

HERE = "nnterp_vision.families."

SERVED = {
    "llava": HERE + "llava",
    "llava_next": HERE + "llava_next",
    "vipllava": HERE + "vipllava",
    "paligemma": HERE + "paligemma",
    "gemma3": HERE + "gemma3",
    "mistral3": HERE + "mistral3",
    "idefics3": HERE + "idefics3",
    "smolvlm": HERE + "smolvlm",
    "qwen2_vl": HERE + "qwen2_vl",
    "qwen2_5_vl": HERE + "qwen2_5_vl",
    "qwen3_vl": HERE + "qwen3_vl",
    "llama4": HERE + "llama4",
    "qwen3_5": HERE + "qwen3_5",
    "qwen3_5_moe": HERE + "qwen3_5_moe",
    "hyperclovax_vision_v2": HERE + "hyperclovax_vision_v2",
    "exaone4_5": HERE + "exaone4_5",
    "aria": HERE + "aria",
    # wrappers whose text model is served and whose tower is not mapped yet
    "gemma4": HERE + "gemma4",
    "gemma4_unified": HERE + "gemma4",
    "got_ocr2": HERE + "got_ocr2",
    "aya_vision": HERE + "aya_vision",
    "perception_lm": HERE + "perception_lm",
    "lighton_ocr": HERE + "lighton_ocr",
    "cohere2_vision": HERE + "cohere2_vision",
    "fast_vlm": HERE + "fast_vlm",
    "internvl": HERE + "internvl",
    "llava_onevision": HERE + "llava_onevision",
    "llava_next_video": HERE + "llava_next_video",
}
