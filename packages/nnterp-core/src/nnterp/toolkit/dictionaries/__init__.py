"""Sparse dictionaries on standard values: SAEs and transcoders, spliced into traces (loaded by ``dictionary_formats``).

A ``Dictionary`` encodes the value it ``reads`` into ``d_sae`` sparse feature
activations and decodes them into the value it ``writes``: the same value for a
sparse autoencoder (``"layers.3.layer_input"``), another for a transcoder
(reads ``"layers.3.mlp_input"``, writes ``"layers.3.mlp.mlp_output"``). Sites
are standard names, or TransformerLens hook names (``"blocks.3.hook_resid_pre"``)
resolved through ``nnterp.toolkit.names``, so one dictionary file runs on every
family with no per-family code::

    sae = Dictionary.from_saelens("path/to/sae")            # cfg.json + sae_weights.safetensors
    sae = Dictionary.from_gemma_scope("params.npz", reads="layers.12.layer_output")
    sae = Dictionary.from_sparsify("run/layers.6", model)    # the hookpoint's standard value on the model
    acts = feature_activations(model, sae, prompts)          # [batch, seq, d_sae]
    logits = ablate_features(model, sae, prompts, [12, 40])  # the rest of the value untouched
    report = evaluate_dictionary(model, sae, prompts)        # MSE, variance explained, L0, CE loss recovered

Inside a trace, ``splice(model, sae, edit=..., keep_error=...)`` puts the
(edited) reconstruction in place of the value; the prompt-level functions are
built on it; they run without gradients and return CPU tensors.

One module an idea: ``dictionary`` (the tensors and their maths), ``sites``
(where it reads and writes on a model), ``splicing``, ``steering``,
``activations``, ``evaluation``; ``_inputs`` checks the prompt-level arguments.
"""

from ._inputs import Index as Index
from ._inputs import Prompts as Prompts
from .activations import feature_activations
from .dictionary import ACTIVATIONS as ACTIVATIONS
from .dictionary import ARCHITECTURES as ARCHITECTURES
from .dictionary import NORMALIZATIONS as NORMALIZATIONS
from .dictionary import Dictionary
from .evaluation import DictionaryEvaluation, evaluate_dictionary
from .splicing import ablate_features, run_with_dictionary, set_features, splice
from .steering import steer_features

__all__ = [
    "Dictionary",
    "DictionaryEvaluation",
    "ablate_features",
    "evaluate_dictionary",
    "feature_activations",
    "run_with_dictionary",
    "set_features",
    "splice",
    "steer_features",
]
