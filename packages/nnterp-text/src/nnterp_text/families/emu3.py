"""Emu3's text model (``Emu3ForCausalLM``): the default block, a residual dropout aside (a no-op in eval).

``Emu3ForCausalLM.save_pretrained`` writes ``model_type = "emu3_text_model"``,
which ``AutoModelForCausalLM`` does not map (it maps ``emu3``, the wrapper's
config), so a text-only checkpoint would not load back; importing this family
registers the missing entry, as transformers' own mapping would.
"""

from nnterp.families import default  # nnterp (and so nnsight) before transformers' models
from transformers import AutoModelForCausalLM, Emu3ForCausalLM, Emu3TextConfig

AutoModelForCausalLM.register(Emu3TextConfig, Emu3ForCausalLM, exist_ok=True)

RENAME = default.RENAME
ENVOYS = default.ENVOYS
