"""Which of nnterp 1.3's values mean something else than their standard replacement, family by family: the evidence for docs/migrating.md.

nnterp 1.3 renamed a block's child called ``self_attn``, ``attn``, ``self_attention``,
``attention`` or ``norm_attn_norm`` to ``self_attn``, and one called ``mlp``,
``block_sparse_moe`` or ``ffn`` to ``mlp``, and served the first tensor of that
module's input and output as ``attentions_input``/``attentions_output`` and
``mlps_input``/``mlps_output``; ``project_on_vocab`` was ``lm_head(ln_final(h))``.
This script reads those tensors with plain torch forward hooks on the
HuggingFace modules, reads the standard values in a trace of the same prompt,
and says which standard value each 1.3 value equals (or none).

    uv run --no-sync python examples/nnterp13/meaning_changes.py llama gemma2 bloom ...
"""

import sys

import torch

import nnterp  # noqa: F401 - before transformers.models
from nnterp import StandardizedTransformer
from nnterp_conformance import tiny_checkpoint

ATTENTION = ("self_attn", "attn", "self_attention", "attention", "norm_attn_norm")
MLP = ("mlp", "block_sparse_moe", "ffn")
STANDARD = ("layer_input", "attention_norm_output", "self_attn.attention_output", "layer_mid", "mlp_input", "mlp.mlp_output", "layer_output")
PROMPT = "The Eiffel Tower is in Paris"


def first(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def legacy_module(block, names):
    """The child nnterp 1.3 renamed: the block's first child under one of ``names`` (as nnsight's rename took it)."""
    found = [name for name, _ in block.named_children() if name in names]
    return (found[0], getattr(block, found[0])) if found else (None, None)


def standard(model, layer, name):
    block = model.layers[layer]
    for part in name.split("."):
        block = getattr(block, part)
    return block


def survey(checkpoint):
    model = StandardizedTransformer(tiny_checkpoint(checkpoint))
    layer = 0
    values = {}
    with torch.no_grad(), model.trace(PROMPT):
        for name in STANDARD:
            try:
                values[name] = standard(model, layer, name).save()
            except Exception as error:  # noqa: BLE001 - a value this family does not serve
                values[name] = type(error).__name__
        norm_in = model.layers[-1].layer_output.save()
        logits = model.logits.save()
    block = model.layers[layer]._module
    legacy = {}
    handles = []
    for kind, names in (("attentions", ATTENTION), ("mlps", MLP)):
        name, module = legacy_module(block, names)
        if module is None:
            continue

        def hook(mod, args, kwargs, output, kind=kind, name=name):
            given = args[0] if args else next(iter(kwargs.values()))
            legacy[f"{kind}_input ({name})"] = first(given).detach()
            legacy[f"{kind}_output ({name})"] = first(output).detach()

        handles.append(module.register_forward_hook(hook, with_kwargs=True))
    with torch.no_grad():
        ids = model.tokenizer(PROMPT, return_tensors="pt")
        model._module(**ids)
    for handle in handles:
        handle.remove()
    rows = {}
    for key, tensor in legacy.items():
        same = [name for name, value in values.items() if isinstance(value, torch.Tensor) and value.shape == tensor.shape and torch.allclose(value, tensor, atol=1e-5)]
        rows[key] = same or ["none"]
    with torch.no_grad():
        plain = model.lm_head._module(model.norm._module(norm_in))
    rows["project_on_vocab"] = ["logits"] if torch.allclose(plain, logits, atol=1e-4) else ["not the logits (the family scales or caps them)"]
    return rows


if __name__ == "__main__":
    for checkpoint in sys.argv[1:]:
        try:
            rows = survey(checkpoint)
        except Exception as error:  # noqa: BLE001 - report and go on
            print(f"{checkpoint}: failed: {type(error).__name__}: {str(error)[:200]}", flush=True)
            continue
        wanted = {"attentions_output": "self_attn.attention_output", "mlps_output": "mlp.mlp_output"}
        for key, same in rows.items():
            expect = wanted.get(key.split(" ")[0])
            flag = "" if expect is None or expect in same else "   <-- CHANGED"
            print(f"{checkpoint}: {key} == {', '.join(same)}{flag}", flush=True)
