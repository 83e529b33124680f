"""The researcher's toolkit on standard values: lenses, steering, caching, attribution, patching and plots.

Every function takes a ``StandardizedTransformer`` and reads only standard
values, so it works on every family the kit passes, with no per-family code.
Each takes ``remote=``, passed to nnsight's trace. The plots need matplotlib
(``pip install 'nnterp-core[plots]'``), imported only when one is drawn.
"""

from .attribution import Attribution, Components, accumulated_resid, decompose_resid, direct_logit_attribution
from .cache import ValueCache, cache_values
from .lens import Prompt, logit_lens, next_token_probs, patchscope_generate, patchscope_lens, run_prompts, topk_closest_tokens
from .patching import Sweep, patch_attention_output, patch_heads, patch_mlp_output, patch_residual
from .plots import plot_attention, plot_logit_lens, plot_sweep
from .steering import skip_layers, steer

__all__ = [
    "Attribution",
    "Components",
    "Prompt",
    "Sweep",
    "ValueCache",
    "accumulated_resid",
    "cache_values",
    "decompose_resid",
    "direct_logit_attribution",
    "logit_lens",
    "next_token_probs",
    "patch_attention_output",
    "patch_heads",
    "patch_mlp_output",
    "patch_residual",
    "patchscope_generate",
    "patchscope_lens",
    "plot_attention",
    "plot_logit_lens",
    "plot_sweep",
    "run_prompts",
    "skip_layers",
    "steer",
    "topk_closest_tokens",
]
