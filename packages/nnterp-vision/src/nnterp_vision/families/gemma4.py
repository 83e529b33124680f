"""Gemma 4 (and Gemma 4 Unified) under its vision-language wrapper: the text model served, its towers not yet.

The wrapper's causal LM is ``Gemma4ForConditionalGeneration``; its text model
is Gemma 4's (nnterp-text's, by the ``gemma4_text`` model type) at
``model.language_model``, served under the standard names on text prompts.
Its vision and audio towers (``model.vision_tower``, ``model.audio_tower``)
are not mapped yet: there is no ``model.vision``, and images reach the model
unobserved. Loaded as a text model (the tokenizer, not the processor).
"""

from nnterp.tiny import TinyConfig

from ..family import VisionFamily

#: the wrapper's text model, under the standard root names (shared with GOT-OCR 2)
WRAPPED_TEXT = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
}

FAMILY = VisionFamily(
    name="gemma4",
    model_types=("gemma4", "gemma4_unified"),
    task="text-generation",
    rename=WRAPPED_TEXT,
    # the text blocks, components and softcapped logits: Gemma 4's text family's
    text_family="gemma4_text",
    # in transformers' causal-LM mapping, their text model served (their towers are not mapped yet)
    tiny={model_type: TinyConfig(model_type) for model_type in ("gemma4", "gemma4_unified")},
)
