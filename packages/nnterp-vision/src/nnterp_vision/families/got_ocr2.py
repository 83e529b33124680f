"""GOT-OCR 2 under its wrapper: the Qwen2 text model served (the default block), its SAM-like tower not yet.

The text model is at ``model.language_model``, served under the standard
names on text prompts; the vision tower (``model.vision_tower``) and projector
are not mapped yet: there is no ``model.vision``.
"""

from nnterp.families import default

from .gemma4 import WRAPPED_TEXT

RENAME = WRAPPED_TEXT
ENVOYS = default.ENVOYS
