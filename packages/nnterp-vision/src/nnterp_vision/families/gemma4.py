"""Gemma 4 (and Gemma 4 Unified) under its vision-language wrapper: the text model served, its towers not yet.

The wrapper's causal LM is ``Gemma4ForConditionalGeneration``; its text model
is Gemma 4's (``nnterp_text.families.gemma4_text``) at
``model.language_model``, served under the standard names on text prompts.
Its vision and audio towers (``model.vision_tower``, ``model.audio_tower``)
are not mapped yet: there is no ``model.vision``, and images reach the model
unobserved.
"""

from nnterp_text.families import gemma4_text
from nnterp_text.families.gemma4_text import project_on_vocab  # noqa: F401 - the family's logits

#: the wrapper's text model, under the standard root names
WRAPPED_TEXT = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
}

RENAME = {**{key: value for key, value in gemma4_text.RENAME.items() if not key.startswith("model.")}, **WRAPPED_TEXT}
ENVOYS = gemma4_text.ENVOYS
