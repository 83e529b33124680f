"""GOT-OCR 2 under its wrapper: the Qwen2 text model served (the default block), its SAM-like tower not yet.

The text model is at ``model.language_model``, served under the standard
names on text prompts; the vision tower (``model.vision_tower``) and projector
are not mapped yet: there is no ``model.vision``. Loaded as a text model (the tokenizer, not the processor).
"""

from nnterp.families import default
from nnterp.tiny import TinyConfig

from ..family import VisionFamily
from .gemma4 import WRAPPED_TEXT

FAMILY = VisionFamily(
    name="got_ocr2",
    model_types=("got_ocr2",),
    task="text-generation",
    rename=WRAPPED_TEXT,
    envoys=default.FAMILY.envoys,
    tiny={"got_ocr2": TinyConfig("got_ocr2")},
)
