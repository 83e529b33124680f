"""The researcher's toolkit on standard values: lenses, steering, caching, attribution, patching, gradients, dictionaries and plots.

Every function takes a ``StandardizedTransformer`` and reads only standard
values, so it works on every family the kit passes, with no per-family code.
Each takes ``remote=``, passed to nnsight's trace. The plots need matplotlib
(``pip install 'nnterp-core[plots]'``), imported only when one is drawn.
"""

from .ablation import Ablation, ablation_sweep
from .attribution import Attribution, Components, accumulated_resid, decompose_resid, direct_logit_attribution
from .cache import ValueCache, cache_values, estimate_cache
from .cache_size import CacheEstimate
from .dictionaries import (
    Dictionary,
    DictionaryEvaluation,
    ablate_features,
    evaluate_dictionary,
    feature_activations,
    run_with_dictionary,
    set_features,
    splice,
    steer_features,
)
from .dictionary_formats import sparsify_sites
from .extraction import ActivationShards, extract_values, load_activations
from .gradients import IntegratedGradients, attribution_patching, integrated_gradients
from .lens import (
    Prompt,
    logit_lens,
    next_token_probs,
    patchscope_generate,
    patchscope_lens,
    run_prompts,
    topk_closest_tokens,
)
from .names import NoStandardValue, UnknownName, standard_name, transformer_lens_name
from .patching import (
    Sweep,
    patch_attention_output,
    patch_heads,
    patch_heads_by_position,
    patch_mlp_output,
    patch_residual,
)
from .path_patching import patch_paths
from .plots import plot_attention, plot_logit_lens, plot_sweep
from .steering import generate_steered, skip_layers, steer
from .tokens import str_tokens, token_bytes, token_labels
from .tuned_lens import TunedLens, tuned_lens

__all__ = [
    "Ablation",
    "ActivationShards",
    "Attribution",
    "CacheEstimate",
    "Components",
    "Dictionary",
    "DictionaryEvaluation",
    "IntegratedGradients",
    "NoStandardValue",
    "Prompt",
    "Sweep",
    "TunedLens",
    "UnknownName",
    "ValueCache",
    "ablate_features",
    "ablation_sweep",
    "accumulated_resid",
    "attribution_patching",
    "cache_values",
    "decompose_resid",
    "direct_logit_attribution",
    "estimate_cache",
    "evaluate_dictionary",
    "extract_values",
    "feature_activations",
    "generate_steered",
    "integrated_gradients",
    "load_activations",
    "logit_lens",
    "next_token_probs",
    "patch_attention_output",
    "patch_heads",
    "patch_heads_by_position",
    "patch_mlp_output",
    "patch_paths",
    "patch_residual",
    "patchscope_generate",
    "patchscope_lens",
    "plot_attention",
    "plot_logit_lens",
    "plot_sweep",
    "run_prompts",
    "run_with_dictionary",
    "set_features",
    "skip_layers",
    "sparsify_sites",
    "splice",
    "standard_name",
    "steer",
    "steer_features",
    "str_tokens",
    "token_bytes",
    "token_labels",
    "topk_closest_tokens",
    "transformer_lens_name",
    "tuned_lens",
]
