"""Check nnterp's TransformerLens table (``nnterp.toolkit.names.HOOKS``) against TransformerLens itself.

    UV_PROJECT_ENVIRONMENT=/tmp/tl-venv uv sync --locked --group bench
    UV_PROJECT_ENVIRONMENT=/tmp/tl-venv uv run --no-sync python scripts/transformer_lens_compare.py [family ...]

For each family both serve, the same tiny weights (their norms' weights and
biases drawn away from one and zero, so a hook before the norm's affine part
cannot pass for one after it) are loaded in TransformerLens's
``TransformerBridge`` and in nnterp, and one prompt runs through both. Every
hook TransformerLens fires that the table maps must equal ``cache_values`` of
its hook name (the standard value, in TransformerLens's layout); every hook
the table says no standard value holds must differ from the ``nearest`` value
it names; a hook the table says TransformerLens lacks on a family must not
fire there. Prints one line per verdict and exits 1 on any wrong claim.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

import nnterp  # noqa: F401 - before any transformers.models module
import torch

from nnterp import StandardizedTransformer, Unavailable
from nnterp.toolkit import cache_values
from nnterp.toolkit.cache import expand_names
from nnterp.toolkit.names import HOOKS, hook_of, standard_name
from nnterp_conformance import tiny_checkpoint

#: the families checked by default: GPT-2 (learned positions), Llama (rotary, grouped-query), GPT-J (parallel,
#: partial rotary, TransformerLens's plain AttentionBridge), GPT-NeoX (parallel, partial rotary), Gemma 2 (sandwich)
FAMILIES = ("gpt2", "llama", "gptj", "gpt_neox", "gemma2")
PROMPT = "The Eiffel Tower is in Paris, and"
#: the bridge's own names for what the table's hooks alias (component inputs and outputs, rotary tables): not rows
NATIVE = ("hook_in", "hook_out", "hook_cos", "hook_sin", "hook_hidden_states", "attn.hook_q_input", "attn.hook_k_input", "attn.hook_v_input", "attn.hook_attn_in")


def perturbed(family: str, folder: Path) -> Path:
    """The family's tiny checkpoint with every norm's weight and bias moved off their initial values, saved in ``folder``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = tiny_checkpoint(family)
    model = AutoModelForCausalLM.from_pretrained(source)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.ndim == 1 and ("norm" in name or "ln" in name.split(".")[-2]):
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))
    target = folder / family
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(source).save_pretrained(target)
    return target


def tl_cache(path: Path) -> dict[str, torch.Tensor]:
    """Every hook TransformerLens's bridge fires on ``PROMPT``, with ``use_hook_mlp_in`` and ``use_split_qkv_input`` on."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    bridge = TransformerBridge.boot_transformers(str(path), hf_model=hf, tokenizer=AutoTokenizer.from_pretrained(path), device="cpu")
    bridge.set_use_hook_mlp_in(True)
    try:
        bridge.set_use_split_qkv_input(True)
    except NotImplementedError:
        pass  # an adapter with no hook before the projections (GPT-J's): the per-head inputs do not fire
    with torch.no_grad():
        _, cache = bridge.run_with_cache(PROMPT, prepend_bos=False)
    return {name: tensor for name, tensor in cache.items()}


def check(family: str, folder: Path) -> list[tuple[str, str, str]]:
    """``(verdict, hook, detail)`` for every hook of the table on ``family``: verdict ``ok`` or ``WRONG``, or ``note``."""
    path = perturbed(family, folder)
    hooks = tl_cache(path)
    model = StandardizedTransformer(path, attn_implementation="eager")
    model_type = model._module.config.model_type
    verdicts: list[tuple[str, str, str]] = []
    mapped, nearest = {}, {}
    for name in hooks:
        hook = hook_of(name)
        if hook is None:
            if not name.endswith(NATIVE) and ".hook_" in "." + name:
                verdicts.append(("note", name, "fired by TransformerLens, not in the table"))
            continue
        layer = int(name.split(".")[1]) if hook.in_block else 0
        standard, _, near = hook.on(model, layer)
        if _absent(hook, model, layer):
            verdicts.append(("WRONG", name, "the table says TransformerLens lacks it here, but it fires"))
        elif standard is not None:
            mapped[name] = standard_name(model, name)
        elif near is not None:
            nearest[name] = near if not hook.in_block or near.startswith("layers.") else f"layers.{layer}.{near}"
        else:
            verdicts.append(("ok", name, "no standard value, none named as nearest"))
    # a hook the table says TransformerLens lacks here (its row maps to nothing, with no nearest) must not fire,
    # and a hook the table maps must fire unless its standard value is unavailable too
    for hook in HOOKS:
        for layer in range(model.num_layers) if hook.in_block else [0]:
            name = f"blocks.{layer}.{hook.name}" if hook.in_block else hook.name
            if name in hooks:
                continue
            standard, why, _ = hook.on(model, layer)
            if _absent(hook, model, layer):
                verdicts.append(("ok", name, "TransformerLens lacks it, as the table says"))
            elif standard is not None:
                try:
                    expand_names(model, [standard_name(model, name)])
                    verdicts.append(("note", name, f"maps to {standard}, which nnterp serves, but TransformerLens does not fire it"))
                except Unavailable:
                    verdicts.append(("ok", name, f"neither fires: {standard} is unavailable here too"))
    ours = cache_values(model, PROMPT, list(mapped), progress=False)
    for name in mapped:
        theirs, mine = hooks[name][0].float(), ours[name][0].float()
        verdicts.append(_compare(name, f"= {mapped[name]}", theirs, mine, should_match=True))
    near_cache = cache_values(model, PROMPT, sorted(set(nearest.values())), progress=False)
    for name, value in nearest.items():
        hook = hook_of(name)
        theirs = hooks[name][0].float()
        mine = hook.layout.to_transformer_lens(near_cache[value])[0].float()
        verdicts.append(_compare(name, f"!= {value}", theirs, mine, should_match=False))
    for verdict in verdicts:
        print(f"{family:10} {model_type:10} {verdict[0]:5} {verdict[1]}: {verdict[2]}")
    return verdicts


def _absent(hook, model, layer: int) -> bool:
    """Whether the table says TransformerLens serves no such hook on this block (the first ``unless`` that holds says so)."""
    case = next((case for case in hook.unless if case.when.holds(model, layer)), None)
    return case is not None and case.absent


def _compare(name: str, claim: str, theirs: torch.Tensor, mine: torch.Tensor, should_match: bool) -> tuple[str, str, str]:
    if theirs.ndim == mine.ndim + 1 and theirs.shape[:-2] + theirs.shape[-1:] == mine.shape:
        # a copy per head ([pos, head, d_model]) of the value: it differs in layout; say whether every copy equals it
        copies = all(torch.allclose(theirs[..., head, :], mine, atol=1e-5, rtol=1e-4) for head in range(theirs.shape[-2]))
        return ("ok" if copies else "WRONG"), name, f"{claim} in layout: each of its {theirs.shape[-2]} head copies {'equals' if copies else 'differs from'} it"
    if theirs.shape != mine.shape:
        same = False
        detail = f"shapes {tuple(theirs.shape)} and {tuple(mine.shape)}"
    else:
        finite = torch.isfinite(theirs) & torch.isfinite(mine)
        same = bool(torch.equal(finite, torch.isfinite(theirs))) and torch.allclose(theirs[finite], mine[finite], atol=1e-5, rtol=1e-4)
        detail = f"max |difference| {float((theirs - mine)[finite].abs().max()):.2e}" if finite.any() else "no finite entries"
        if not torch.equal(torch.isfinite(theirs), torch.isfinite(mine)):
            detail += "; masked entries: TransformerLens " + _masked(theirs) + ", nnterp " + _masked(mine)
    verdict = "ok" if same == should_match else "WRONG"
    return verdict, name, f"{claim} ({detail})"


def _masked(tensor: torch.Tensor) -> str:
    return "-inf" if torch.isinf(tensor).any() else f"finite (min {float(tensor.min()):.3g})"


def main(families: list[str]) -> int:
    counts: Counter = Counter()
    with tempfile.TemporaryDirectory() as folder:
        for family in families:
            counts.update(verdict for verdict, _, _ in check(family, Path(folder)))
    print(dict(counts))
    return 1 if counts["WRONG"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(FAMILIES)))
