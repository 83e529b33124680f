"""Write docs/errors.md: each common mistake, run on a tiny checkpoint, with the message it prints.

    uv run python scripts/errors_page.py [--check]

Every case is a function below; the page shows its body and what running it
raised, so the messages on the page are the library's own, never typed.
``--check`` exits non-zero when the committed page is stale instead of writing it.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator

import nnterp  # noqa: F401 - before any transformers.models module
import torch
from nnterp import Attention, EProperty, StandardizedTransformer
from nnterp_conformance import tiny_checkpoint

from generated import write_or_check

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "errors.md"

#: (section, title, what the case shows, the function, a hidden set-up) in page order
CASES: list[tuple[str, str, str, Callable, Callable | None]] = []
#: the models the cases run on, loaded once by ``render``
model: Any = None
gpt2: Any = None
cached: Any = None


def case(section: str, title: str, note: str = "", setup: Callable | None = None) -> Callable:
    def register(function: Callable) -> Callable:
        CASES.append((section, title, note, function, setup))
        return function

    return register


class CachedKeys(Attention):
    """Keys read where the attention joins them to the cache: a branch a call without a cache does not take."""

    @EProperty("source.cache_update_0.output", "keys joined to the cache", select=0)
    def cached_keys(self, value):
        return value


@contextlib.contextmanager
def without_recurrent() -> Iterator[None]:
    """An environment without nnterp-recurrent: its families' model types hidden from the registry."""
    import dataclasses

    from nnterp import registry

    installed = registry.catalog
    index = installed()
    # the model types no longer resolve; the tiny checkpoint (written by the kit, which has them all) still does
    recurrent = {name for name, module in index.modules.items() if module.startswith("nnterp_recurrent")}
    hidden = dataclasses.replace(index, model_types={model_type: name for model_type, name in index.model_types.items() if name not in recurrent})
    indexed = registry.indexed
    registry.catalog = registry.indexed = lambda: hidden
    try:
        yield
    finally:
        registry.catalog, registry.indexed = installed, indexed


# -- loading ----------------------------------------------------------------------------


@case("Loading", "A local path with a typo", "transformers alone calls it a malformed hub id.")
def missing_directory():
    StandardizedTransformer("./checkpoints/llama-typo")


@case("Loading", "A folder that holds no checkpoint")
def folder_without_config():
    os.makedirs("./empty-folder", exist_ok=True)
    StandardizedTransformer("./empty-folder")


@case("Loading", "A family whose package is not installed", "Here nnterp-recurrent's entry points are hidden.", setup=without_recurrent)
def package_missing():
    StandardizedTransformer(tiny_checkpoint("mamba"))


@case(
    "Loading",
    "A device map that starts on the disk",
    "transformers alone stops at `torch.device('disk')` inside its pipeline, after loading every weight; "
    "with `device_map=\"auto\"` the same happens when `max_memory` leaves the CPU no room for the embedding.",
)
def device_map_on_disk():
    StandardizedTransformer(tiny_checkpoint("llama"), device_map={"": "disk"}, offload_folder="./offload")


@contextlib.contextmanager
def dory_written() -> Iterator[None]:
    """A tiny checkpoint of dory (an nGPT block with looped layers, which no family serves) at ./checkpoints/dory."""
    from nnterp.tiny import TinyConfig
    from nnterp_conformance.checkpoints import write_checkpoint

    write_checkpoint(TinyConfig("dory"), Path("checkpoints/dory"))
    yield


@case(
    "Loading",
    "A model type nnterp keeps out of reach",
    "Refused with the reason its structure gives no standard value one meaning. Without it, a family inferred from "
    "the module tree loads, and its proof at load withdraws the values it refutes.",
    setup=dory_written,
)
def out_of_reach():
    StandardizedTransformer("./checkpoints/dory")


# -- the order rule ---------------------------------------------------------------------


@case("The order rule", "A value read after a later one", "nnsight alone names the native location, `model.model.layers.0.input.i0`.")
def read_out_of_order():
    with model.trace("The Eiffel Tower is in"):
        later = model.layers[1].layer_output.save()
        earlier = model.layers[0].layer_input.save()


@case("The order rule", "A value written after a later one")
def write_out_of_order():
    with torch.no_grad(), model.trace("Hello world"):
        later = model.layers[2].layer_output.save()
        model.layers[0].mlp.mlp_output = later * 0


@case(
    "The order rule",
    "A value on a branch this call did not take",
    "`cached` reads keys where the attention joins them to the cache (`cache.update`); "
    "a call with `use_cache=False` never runs that line.",
)
def never_ran():
    with torch.no_grad(), cached.trace("Hello world", use_cache=False):
        keys = cached.layers[0].self_attn.cached_keys.save()


@case("The order rule", "A value inside a skipped block")
def inside_skipped_block():
    with torch.no_grad(), model.trace("Hello world"):
        model.layers[1].skip(model.layers[1].layer_input)
        attention = model.layers[1].self_attn.attention_output.save()


# -- names ------------------------------------------------------------------------------


@case("Names", "A block index out of range")
def index_out_of_range():
    model.layers[99]


@case("Names", "A value a dense MLP does not have")
def router_on_dense():
    with model.trace("Hello world"):
        logits = model.layers[0].mlp.router_logits.save()


@case("Names", "A sublayer's value asked of the block")
def value_on_the_block():
    model.layers[0].attention_output


@case("Names", "A misspelled value")
def misspelled():
    model.layers[1].layer_outptu


@case("Names", "The pattern under sdpa", "Load with `attn_implementation='eager'` to read it.")
def pattern_under_sdpa():
    sdpa = StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="sdpa")
    with sdpa.trace("Hello world"):
        pattern = sdpa.layers[0].self_attn.attention_probabilities.save()


# -- writes -----------------------------------------------------------------------------


@case("Writes", "A tensor of the wrong shape", "Refused at the assignment, before the model runs: torch alone fails inside the forward.")
def wrong_shape():
    with torch.no_grad(), model.trace("Hello world"):
        model.layers[0].layer_output = torch.zeros(1, 3, 7)


@case("Writes", "A pattern of the wrong size")
def wrong_pattern():
    with torch.no_grad(), model.trace("Hello world"):
        model.layers[0].self_attn.attention_probabilities = torch.full((1, 4, 2, 2), 0.5)


@case("Writes", "A tensor in another dtype")
def wrong_dtype():
    with torch.no_grad(), model.trace("Hello world"):
        model.layers[1].layer_output = torch.zeros(1, 8, 64, dtype=torch.float64)


# -- gradients --------------------------------------------------------------------------


@case("Gradients", "A gradient read outside `backward()`", "torch alone returns None here.")
def gradient_outside_backward():
    with model.trace("Hello world"):
        gradient = model.layers[1].layer_output.grad.save()


# -- prompts ----------------------------------------------------------------------------


@case("Prompts", "An empty prompt")
def empty_prompt():
    with model.trace(""):
        output = model.layers[0].layer_output.save()


@case("Prompts", "Strings and token ids in one batch")
def mixed_batch():
    with model.trace(["Hello world", [1, 2, 3]]):
        output = model.layers[0].layer_output.save()


@case("Prompts", "Token ids outside the vocabulary")
def ids_outside_vocabulary():
    with model.trace(torch.tensor([[1, 2, 100000]])):
        output = model.layers[0].layer_output.save()


@case("Prompts", "A prompt longer than a learned position table", "GPT-2 learns its positions (`wpe`); rotary models have no such limit.")
def too_long():
    with gpt2.trace(torch.ones(1, gpt2.config.n_positions + 1, dtype=torch.long)):
        output = gpt2.layers[0].layer_output.save()


# -- the toolkit ------------------------------------------------------------------------


@case("Toolkit", "A patching sweep whose cells do not fit its memory budget", "A sweep packs its cells along the batch axis; what one forward takes is estimated before the model runs (`nnterp.toolkit.packing`).")
def sweep_over_budget():
    from nnterp.toolkit import patch_heads

    patch_heads(model, "John met Mary. J", "John met Mary. M", lambda logits: logits[0, -1, 0], memory_budget=100_000, progress=False)


@case("Toolkit", "More cells per forward than the budget holds")
def cells_over_budget():
    from nnterp.toolkit import patch_heads

    patch_heads(model, "John met Mary. J", "John met Mary. M", lambda logits: logits[0, -1, 0], cells_per_forward=64, memory_budget=2**20, progress=False)


@case("Toolkit", "Positions for the logits out of order")
def logits_at_out_of_order():
    from nnterp.toolkit import patch_residual

    patch_residual(model, "John met Mary. J", "John met Mary. M", lambda logits: logits[0, -1, 0], logits_at=[-1, 0], progress=False)


# -- tracing pitfalls -------------------------------------------------------------------


@case(
    "Tracing pitfalls",
    "A value used after the trace without `.save()`",
    "A trace hands back only the values marked with `.save()`. nnsight alone leaves the name unbound "
    "(`NameError` at this line) or holding what it held before the trace; nnterp binds it to a value "
    "whose first use says why.",
)
def not_saved():
    with model.trace("Hello world"):
        hidden = model.layers[0].layer_output
    hidden.shape


@case(
    "Tracing pitfalls",
    "A trace inside a trace",
    "nnsight alone fails inside the run in its own terms (`AttributeError: 'NoneType' object has no attribute "
    "'event'`, or `ValueError: cyclic parent chain`).",
)
def nested_trace():
    with model.trace("The Eiffel Tower is in"):
        with model.trace("The Colosseum is in"):
            hidden = model.layers[0].layer_output.save()


@case(
    "Tracing pitfalls",
    "A value patched across invokes without a barrier",
    "nnsight alone: `NameError: name 'source' is not defined`. A subclass of `NameError`, so an `except NameError` still catches it.",
)
def without_barrier():
    with model.trace() as tracer:
        with tracer.invoke("The Eiffel Tower is in"):
            source = model.layers[0].layer_output
        with tracer.invoke("The Colosseum is in"):
            model.layers[0].layer_output = source


@case(
    "Tracing pitfalls",
    "Gradients read in forward order",
    "nnsight alone: `OutOfOrderError: '140234954241632.grad.i0' was requested but the model already ran past it`.",
)
def gradients_in_forward_order():
    with model.trace("Hello world"):
        early = model.layers[0].layer_output
        late = model.layers[1].layer_output
        metric = model.logits[:, -1].sum()
        with metric.backward():
            early_grad = early.grad.save()
            late_grad = late.grad.save()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """The model's weights frozen, as NDIF's servers load every model; trainable again after."""
    model._module.requires_grad_(False)
    try:
        yield
    finally:
        model._module.requires_grad_(True)


@case(
    "Tracing pitfalls",
    "A backward pass on frozen weights",
    "What a gradient trace meets on NDIF, whose servers freeze every model's weights. nnsight alone: "
    "`NotImplementedError: This tensor does not require grad, so a backward session cannot produce gradients`.",
    setup=frozen,
)
def backward_on_frozen_weights():
    with model.trace("Hello world"):
        value = model.layers[1].layer_output
        metric = model.logits[:, -1].sum()
        with metric.backward():
            gradient = value.grad.save()


@case("Tracing pitfalls", "A value first read inside `backward()`", "Before nnterp said so, this read as a block that did not run.")
def read_in_backward():
    with model.trace("Hello world"):
        metric = model.logits[:, -1].sum()
        with metric.backward():
            gradient = model.layers[1].layer_output.grad.save()


@case(
    "Tracing pitfalls",
    "A value outside a trace",
    "nnsight alone: ``ValueError: Cannot access `model.model.layers.0.output` outside of interleaving``.",
)
def outside_trace():
    model.layers[0].layer_output.shape


@case(
    "Tracing pitfalls",
    "A weight taken before the first trace",
    "nnsight builds the model on the meta device and loads the weights at the first trace (or at "
    "`model.dispatch()`), replacing the modules: a weight, a module or `model._module` taken before then "
    "is the meta one and stays so. torch's own message; take handles after a trace or after "
    "`model.dispatch()`, or load with `dispatch=True`.",
)
def weight_before_first_trace():
    fresh = StandardizedTransformer(tiny_checkpoint("llama"))
    unembedding = fresh.lm_head.weight
    with torch.no_grad(), fresh.trace("Hello world"):
        logits = fresh.logits.save()
    unembedding[0].tolist()


@case(
    "Tracing pitfalls",
    "Statements after an open `tracer.all()` loop",
    "The loop ends its invoke when the model stops, and nnsight skips every statement after it with only a "
    "`UserWarning` ('... was never reached'): alone, `ids` is unbound (`UnboundLocalError`) or keeps what it "
    "held before. nnterp binds the names those statements bind to a value whose first use says so. "
    "Put what follows the loop in an invoke of its own, or bound the loop and pass `min_new_tokens=`.",
)
def after_open_loop():
    with model.generate("Hello world", max_new_tokens=2) as tracer:
        for step in tracer.all():
            hidden = model.layers[0].layer_output.save()
        ids = tracer.result.save()
    ids.shape


# -- cache, extraction and dictionaries arguments ----------------------------------------


@contextlib.contextmanager
def another_run() -> Iterator[None]:
    """An extraction of other texts already in ``acts/``."""
    from nnterp.toolkit.extraction import extract_values

    extract_values(model, ["Other texts", "extracted", "before"], ["layers.0.layer_output"], "acts/", progress=False)
    yield


@case("Toolkit", "A batch size of zero", "Checked before the model runs; Python alone fails inside `range()`.")
def cache_batch_size_zero():
    from nnterp.toolkit import cache_values

    cache = cache_values(model, ["Hello world", "The Eiffel Tower"], ["layers.0.layer_output"], batch_size=0)


@case(
    "Toolkit",
    "An extraction into a directory holding another run",
    "`acts/` holds a finished extraction of three other texts: it is never returned for these.",
    setup=another_run,
)
def extraction_of_other_texts():
    from nnterp.toolkit.extraction import extract_values

    shards = extract_values(model, ["The Eiffel Tower is in Paris", "Hello world"], ["layers.0.layer_output"], "acts/")


# -- toolkit arguments ------------------------------------------------------------------


@case("Toolkit", "Steering a block the model lacks", "Checked as the trace starts; before, `% num_layers` steered block 2 of this 3-block model instead.")
def steer_out_of_range():
    from nnterp.toolkit import steer

    with torch.no_grad(), model.trace("Hello world"):
        steer(model, [5], torch.randn(model.hidden_size), factor=4.0)
        logits = model.logits.save()


@case("Toolkit", "A steering vector of another width")
def steer_wrong_width():
    from nnterp.toolkit import steer

    with torch.no_grad(), model.trace("Hello world"):
        steer(model, 1, torch.randn(128))
        logits = model.logits.save()


@case("Toolkit", "A toolkit function called inside an open trace", "It runs forwards of its own, which the open trace cannot.")
def toolkit_inside_trace():
    from nnterp.toolkit import logit_lens

    with torch.no_grad(), model.trace("Hello world"):
        lens = logit_lens(model, "The Eiffel Tower is in")


# -- the page ---------------------------------------------------------------------------


def body(function: Callable) -> str:
    """The function's body as the reader would write it."""
    lines = inspect.getsource(function).splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("def "))
    return textwrap.dedent("\n".join(lines[start + 1 :])).strip()


def outcome(function: Callable, setup: Callable | None) -> str:
    """``ErrorType: message`` for what running ``function`` raised."""
    with setup() if setup is not None else contextlib.nullcontext():
        try:
            function()
        except Exception as error:  # noqa: BLE001 - what it raised is the point
            return f"{type(error).__name__}: {error}"
    raise AssertionError(f"{function.__name__} raised nothing: the page would show a mistake that is not refused")


def render() -> str:
    """The page: every case's code and its message, from running them now."""
    global model, gpt2, cached
    model = StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="eager")
    gpt2 = StandardizedTransformer(tiny_checkpoint("gpt2"), attn_implementation="eager")
    cached = StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="eager", envoys={"layers.*.self_attn": CachedKeys})
    parts = [
        "# Common errors",
        "",
        "What nnterp says when a trace, a write or a load goes wrong: each case below ran on a tiny",
        "checkpoint (`model` is the tiny Llama, `gpt2` the tiny GPT-2), and its message is what it printed.",
        "Errors name standard values as you wrote them (`layers[0].layer_input`), come before the model",
        "runs wherever the input already says what is wrong, and leave the model and any cache you handed",
        "the call as they were. This page is generated: `uv run python scripts/errors_page.py`.",
    ]
    section = None
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
        # a section's cases together, the sections in the order they first appear
        order = list(dict.fromkeys(heading for heading, *_ in CASES))
        for heading, title, note, function, setup in sorted(CASES, key=lambda entry: order.index(entry[0])):
            if heading != section:
                parts += ["", f"## {heading}"]
                section = heading
            parts += ["", f"### {title}", ""]
            if note:
                parts += [note, ""]
            parts += ["```python fragment", body(function), "```", "", "```text", outcome(function, setup), "```"]
    return "\n".join(parts) + "\n"


def main() -> int:
    return write_or_check(TARGET, render(), "errors_page.py")


if __name__ == "__main__":
    sys.exit(main())
