"""The sweeps item: a packed patching sweep against one patched trace per cell and against transformer-lens' patching.

    uv run --group bench python benchmarks/run.py --only sweeps --write

On the GPT-2-small-sized checkpoint, one torch thread, the prompts below (a
pair differing in one token, 15 tokens under the benchmark's tokenizer, about
an IOI prompt's length under GPT-2's own): ``patch_heads`` (12 x 12 cells) and
``patch_residual`` (12 layers x 15 positions) as nnterp runs them (packed: one
forward per layer, the blocks before it skipped), against the loop they ran
before (one trace per cell, the clean value written in: the same cells, each
its own forward), and against transformer-lens' ``get_act_patch_attn_head_out_all_pos``
and ``get_act_patch_resid_pre`` on its ``TransformerBridge`` booted on the same
weights (one ``run_with_hooks`` per cell). A third nnterp row passes
``logits_at=[-1]``, the position the metric reads, so each pack computes the
unembedding there alone. Both packed variants' values are checked equal to the
loop's, bit for bit, before timing.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Callable

import torch

from nnterp import StandardizedTransformer

CLEAN = "Mary and John. J gave"
CORRUPTED = "Mary and John. M gave"


def _metric(tokenizer: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    j, m = tokenizer(" J")["input_ids"][-1], tokenizer(" M")["input_ids"][-1]
    return lambda logits: (logits[:, -1, j] - logits[:, -1, m]).mean()


def _one_trace_per_cell(model: Any, site: str, write: Callable[[torch.Tensor, torch.Tensor, int], None], columns: int) -> Callable[[], torch.Tensor]:
    """The loop before packing: the clean run once, the corrupted once, then one trace per (layer, column) cell."""
    metric = _metric(model.tokenizer)
    where, _, name = site.rpartition(".")

    def owner(layer: int) -> Any:
        envoy = model.layers[layer]
        for part in filter(None, where.split(".")):
            envoy = getattr(envoy, part)
        return envoy

    def run() -> torch.Tensor:
        values = torch.empty(model.num_layers, columns)
        with torch.no_grad():
            saved: list = []
            with model.trace(CLEAN):
                saved.extend(getattr(owner(layer), name).clone() for layer in range(model.num_layers))
            with model.trace(CORRUPTED):
                metric(model.logits)
            for layer in range(model.num_layers):
                for column in range(columns):
                    out: list = []
                    with model.trace(CORRUPTED):
                        patched = getattr(owner(layer), name).clone()
                        write(patched, saved[layer], column)
                        setattr(owner(layer), name, patched)
                        out.append(float(metric(model.logits)))
                    values[layer, column] = out[0]
        return values

    return run


def _write_head(patched: torch.Tensor, source: torch.Tensor, head: int) -> None:
    patched[:, :, head] = source[:, :, head]


def _write_position(patched: torch.Tensor, source: torch.Tensor, position: int) -> None:
    patched[:, position] = source[:, position]


@contextlib.contextmanager
def _quiet() -> Any:
    """transformer-lens' sweeps draw a progress bar per sweep (tqdm, no argument to turn it off): into the void."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        yield


def _lens(path: Path, load: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[], Any]] | str:
    """transformer-lens' two sweeps on its bridge over the same weights, or why they cannot run here."""
    try:
        from transformer_lens import patching
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError:
        return "transformer-lens is not installed (uv run --group bench ...)"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", **load).eval()
    bridge = TransformerBridge.boot_transformers(str(path), hf_model=hf, tokenizer=tokenizer, device=str(hf.device))
    bridge.enable_compatibility_mode(disable_warnings=True)
    metric = _metric(tokenizer)
    clean, corrupted = (tokenizer(text, return_tensors="pt")["input_ids"].to(hf.device) for text in (CLEAN, CORRUPTED))

    def heads() -> Any:
        with torch.no_grad(), _quiet():
            _, cache = bridge.run_with_cache(clean)
            return patching.get_act_patch_attn_head_out_all_pos(bridge, corrupted, cache, metric)

    def residual() -> Any:
        with torch.no_grad(), _quiet():
            _, cache = bridge.run_with_cache(clean)
            return patching.get_act_patch_resid_pre(bridge, corrupted, cache, metric)

    return heads, residual


def sweeps_item(path: Path, repeats: int, interleaved: Callable[..., dict[str, float]], load: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Medians in ms of each sweep's variants, by title; the packed values checked equal to the loop's first."""
    from nnterp.toolkit import patch_heads, patch_residual

    model = StandardizedTransformer(path, attn_implementation="eager", **load)
    metric = _metric(model.tokenizer)
    positions = len(model.tokenizer(CLEAN)["input_ids"])
    heads = model.layers[0].self_attn.num_heads
    packed_heads = lambda: patch_heads(model, CLEAN, CORRUPTED, metric, progress=False).values  # noqa: E731
    packed_residual = lambda: patch_residual(model, CLEAN, CORRUPTED, metric, progress=False).values  # noqa: E731
    last_heads = lambda: patch_heads(model, CLEAN, CORRUPTED, metric, logits_at=[-1], progress=False).values  # noqa: E731
    last_residual = lambda: patch_residual(model, CLEAN, CORRUPTED, metric, logits_at=[-1], progress=False).values  # noqa: E731
    loop_heads = _one_trace_per_cell(model, "self_attn.attention_head_outputs", _write_head, heads)
    loop_residual = _one_trace_per_cell(model, "layer_input", _write_position, positions)
    for packed, last, loop, what in ((packed_heads, last_heads, loop_heads, "patch_heads"), (packed_residual, last_residual, loop_residual, "patch_residual")):
        expected = loop()
        for variant, values in (("packed", packed()), ("packed, logits_at=[-1]", last())):
            gap = (values - expected).abs().max().item()
            if gap != 0:
                raise AssertionError(f"{what} {variant}: the sweep differs from one trace per cell by {gap}")
    lens = _lens(path, load)
    cells = model.num_layers * heads
    title_heads = f"GPT-2 small size: patching sweep, patch_heads ({model.num_layers} x {heads} = {cells} cells, {positions} tokens)"
    cells = model.num_layers * positions
    title_residual = f"GPT-2 small size: patching sweep, patch_residual ({model.num_layers} x {positions} = {cells} cells)"
    out = {}
    for title, packed, last, loop, lens_index in (
        (title_heads, packed_heads, last_heads, loop_heads, 0),
        (title_residual, packed_residual, last_residual, loop_residual, 1),
    ):
        variants = {
            "one patched trace per cell (the loop before packing)": loop,
            "nnterp, packed (one forward per layer)": packed,
            "nnterp, packed, logits_at=[-1] (the unembedding at the metric's position)": last,
        }
        if not isinstance(lens, str):
            variants["transformer-lens patching (one run_with_hooks per cell)"] = lens[lens_index]
        out[title] = interleaved(variants, repeats, warmup=0)  # the equality check above warmed every path
        if isinstance(lens, str):
            out[title][f"transformer-lens: not measured, {lens}"] = float("nan")
    return out
