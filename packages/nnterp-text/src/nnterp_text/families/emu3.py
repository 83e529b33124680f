"""Emu3's text model (``Emu3ForCausalLM``): the default block, a residual dropout aside (a no-op in eval).

``Emu3ForCausalLM.save_pretrained`` writes ``model_type = "emu3_text_model"``,
which ``AutoModelForCausalLM`` does not map (it maps ``emu3``, the wrapper's
config), so a text-only checkpoint would not load back; importing this family
registers the missing entry, as transformers' own mapping would.
"""

from nnterp import TinyConfig  # nnterp (and so nnsight) before transformers' models
from nnterp.families import default

from transformers import AutoModelForCausalLM, Emu3ForCausalLM, Emu3TextConfig

AutoModelForCausalLM.register(Emu3TextConfig, Emu3ForCausalLM, exist_ok=True)


FAMILY = default.FAMILY.replace(name="emu3", model_types=("emu3", "emu3_text_model"), tiny={"emu3": TinyConfig("emu3")})
