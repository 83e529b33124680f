"""The hooks-path item: ``cache_values`` of every block's boundary values on plain forward hooks, against a trace and hooks by hand.

On the GPT-2-small-sized checkpoint, one torch thread, 8 prompts in one
batch: every block's ``layer_output``, ``self_attn.attention_output`` and
``mlp.mlp_output`` (36 tensors) read three ways, interleaved:

* forward hooks written by hand on a plain transformers model (the floor: the
  same tokenization, left padding and mask-derived positions, each value
  copied as its module hands it over, the forward ended after the last block);
* ``cache_values`` as it runs by default, on the hooks path
  (``nnterp.toolkit._hooks``), since every value sits at a module boundary;
* ``cache_values(..., engine="nnsight")``, one trace.

The three are checked equal, tensor for tensor, before timing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import interleaved  # noqa: E402

#: eight prompts of a few lengths, so the batch is left-padded
PROMPTS = [
    "The Eiffel Tower is in Paris, the city of",
    "Hello world, this is a benchmark of the standard values",
    "A short one",
    "Residual streams carry what every block adds to them",
    "One two three four five six seven eight nine ten",
    "Attention heads move information between positions",
    "The MLP reads the stream and writes back",
    "Last",
]
VALUES = ("layer_output", "self_attn.attention_output", "mlp.mlp_output")
NAMES = [f"layers.*.{value}" for value in VALUES]

HAND = "forward hooks by hand (plain transformers)"
HOOKS = "cache_values, hooks path (default)"
NNSIGHT = "cache_values, engine='nnsight' (one trace)"


class _Done(Exception):
    pass


def hand_written(path: Path) -> Callable[[], dict[str, torch.Tensor]]:
    """Forward hooks on a plain GPT-2: every block's output, its attention's and its MLP's, keyed by standard name."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    blocks = hf.transformer.h
    last = len(blocks) - 1

    def run() -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}

        def keep(name: str, stop: bool = False) -> Callable[..., None]:
            def hook(_module: Any, _args: Any, output: Any) -> None:
                tensor = output[0] if isinstance(output, tuple) else output
                out[name] = tensor.detach().clone()
                if stop:
                    raise _Done

            return hook

        handles = []
        for index, block in enumerate(blocks):
            handles.append(block.attn.register_forward_hook(keep(f"layers.{index}.self_attn.attention_output")))
            handles.append(block.mlp.register_forward_hook(keep(f"layers.{index}.mlp.mlp_output")))
            handles.append(block.register_forward_hook(keep(f"layers.{index}.layer_output", stop=index == last)))
        try:
            encoding = tokenizer(PROMPTS, padding=True, return_tensors="pt")
            mask = encoding["attention_mask"]
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.no_grad():
                hf(input_ids=encoding["input_ids"], attention_mask=mask, position_ids=positions)
        except _Done:
            pass
        finally:
            for handle in handles:
                handle.remove()
        return out

    return run


def hooks_path_item(path: Path, repeats: int) -> dict[str, float]:
    """Median milliseconds of each variant, keyed by row label (hooks by hand first), interleaved on one torch thread."""
    from nnterp import StandardizedTransformer
    from nnterp.toolkit import cache_values

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = StandardizedTransformer(path, attn_implementation="eager")
        by_hand = hand_written(path)

        def hooked() -> Any:
            return cache_values(model, PROMPTS, NAMES, batch_size=len(PROMPTS), progress=False)

        def traced() -> Any:
            return cache_values(model, PROMPTS, NAMES, batch_size=len(PROMPTS), progress=False, engine="nnsight")

        fast, slow, floor = hooked(), traced(), by_hand()
        assert fast.engine == "hooks" and slow.engine == "nnsight", (fast.engine, fast.fallback)
        mask = fast.attention_mask.bool()
        for name in fast:
            assert torch.equal(fast[name], slow[name]), name
            # a padded position's value is whatever the model computes there: compare the real tokens
            assert torch.allclose(fast[name][mask], floor[name][mask], atol=1e-5, rtol=1e-4), name
        return interleaved({HAND: by_hand, HOOKS: hooked, NNSIGHT: traced}, repeats)
    finally:
        torch.set_num_threads(threads)
