"""What the standard values cost: nnterp against plain nnsight and plain transformers, measured side by side.

    uv run python benchmarks/run.py                 # print the table
    uv run python benchmarks/run.py --write         # and write it into benchmarks/README.md
    uv run python benchmarks/run.py --kit           # also time the kit with one and two workers (minutes)
    uv run python benchmarks/run.py --only construction,caching --write   # these items; every other row kept

`--write` replaces the rows of the items that ran and keeps the others (the
kit's, unless `--kit`), with the machine line of this run.

Every variant of an item runs on the same weights and the same prompts, in one
process, interleaved (one repetition of each variant in turn), with the torch
thread count fixed; the table gives medians and each variant's ratio to the
item's baseline. Nothing is downloaded: the GPT-2-small-sized checkpoint
(12 layers, width 768, vocabulary 50257, float32, random weights) is written
locally once, as the kit writes its tiny ones.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import StandardizedTransformer

HERE = Path(__file__).resolve().parent
PROMPTS = ["The Eiffel Tower is in Paris, the city of", "Hello world, this is a benchmark of the standard values"]
MARKERS = ("<!-- results -->", "<!-- /results -->")


# -- the checkpoints -------------------------------------------------------------------


def gpt2_small() -> Path:
    """A GPT-2-small-sized checkpoint with random weights, written once under the kit's cache."""
    from nnterp_conformance.checkpoints import SEED, build_tokenizer, cache_root
    from transformers import AutoModelForCausalLM, GPT2Config

    target = cache_root() / "bench-gpt2-small"
    if (target / "config.json").exists():
        return target
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(GPT2Config())  # 12 layers, 768 wide, 50257 tokens
    model.save_pretrained(target)
    build_tokenizer().save_pretrained(target)
    return target


def llama_1b() -> Path:
    """A Llama-shaped checkpoint of about 1.1B parameters (16 layers, width 2048, MLP 8192, 32 heads, vocabulary 32000),
    random weights, written once: the model size the GPU rows are measured on."""
    from nnterp_conformance.checkpoints import SEED, build_tokenizer, cache_root
    from transformers import AutoModelForCausalLM, LlamaConfig

    target = cache_root() / "bench-llama-1b"
    if (target / "config.json").exists():
        return target
    torch.manual_seed(SEED)
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        vocab_size=max(32000, len(tokenizer)), max_position_embeddings=2048, tie_word_embeddings=True,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def tiny_gpt2() -> Path:
    from nnterp_conformance.checkpoints import tiny_checkpoint

    return tiny_checkpoint("gpt2")


# -- timing ----------------------------------------------------------------------------


def interleaved(
    variants: dict[str, Callable[[], Any]], repeats: int, warmup: int = 2, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Median time of each variant in milliseconds, the variants run in turn, starting each round one further.

    ``clock`` is wall time by default; ``time.thread_time`` counts this thread's CPU time, which a shared machine moves less.
    """
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        for offset in range(len(names)):
            name = names[(round_ + offset) % len(names)]
            synchronize()
            start = clock()
            variants[name]()
            synchronize()
            times[name].append((clock() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


#: how every model of the run is loaded: ``--device`` and ``--dtype`` (float32 on the CPU by default)
LOAD: dict[str, Any] = {}


def synchronize() -> None:
    """Wait for the accelerator's queued work, so a variant's time is its own (nothing on the CPU)."""
    if LOAD.get("device_map", "cpu") != "cpu" and torch.cuda.is_available():
        torch.cuda.synchronize()


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the models, loaded three ways -------------------------------------------------------


def plain_nnsight(path: Path, **kwargs: Any) -> Any:
    """nnsight's TransformersModel on a local directory, handed the tokenizer it cannot find on its own under transformers 5.23."""
    from nnsight.modeling.transformers import TransformersModel
    from transformers import AutoTokenizer

    return TransformersModel(str(path), task="text-generation", tokenizer=AutoTokenizer.from_pretrained(path), **kwargs)


class Loaded:
    """One checkpoint as nnterp, plain nnsight and plain transformers load it, each run once so weights are real."""

    def __init__(self, path: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.path = path
        self.nnterp = StandardizedTransformer(path, attn_implementation="eager", **LOAD)
        self.nnsight = plain_nnsight(path, attn_implementation="eager", **LOAD)
        self.hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", **LOAD).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        tokenizer.padding_side = "left"
        device = self.hf.device
        self.inputs = tokenizer(PROMPTS, return_tensors="pt", padding=True).to(device)
        # the contributions item's batch of 8, numbered from each row's first real token as nnsight numbers it
        self.inputs8 = dict(tokenizer(CACHE_PROMPTS, return_tensors="pt", padding=True))
        self.inputs8["position_ids"] = (self.inputs8["attention_mask"].cumsum(1) - 1).clamp(min=0)
        self.inputs8 = {key: value.to(device) for key, value in self.inputs8.items()}
        for model in (self.nnterp, self.nnsight):
            with torch.no_grad(), model.trace(PROMPTS):
                pass
        # GPT-2's blocks are transformer.h with attn; a Llama's model.layers with self_attn
        gpt2 = hasattr(self.hf, "transformer")
        self.hf_blocks = self.hf.transformer.h if gpt2 else self.hf.model.layers
        self.ns_blocks = self.nnsight.transformer.h if gpt2 else self.nnsight.model.layers
        self.attention = "attn" if gpt2 else "self_attn"
        self.layers = len(self.hf_blocks)
        # the op the family reads the pattern at: the same drill for plain nnsight, so both read one location
        self.pattern_key = type(self.nnterp.layers[0].self_attn).attention_probabilities.key

    # item 2: every block's layer_output
    def nnterp_layer_outputs(self) -> list:
        saved: list = []
        with torch.no_grad(), self.nnterp.trace(PROMPTS):
            for i in range(self.layers):
                saved.append(self.nnterp.layers[i].layer_output.save())
        return saved

    def nnsight_layer_outputs(self) -> list:
        saved: list = []
        with torch.no_grad(), self.nnsight.trace(PROMPTS):
            for i in range(self.layers):
                saved.append(self.ns_blocks[i].output.save())
        return saved

    def hooked_layer_outputs(self) -> list:
        saved: list = []
        handles = [block.register_forward_hook(lambda _m, _i, out: saved.append(out)) for block in self.hf_blocks]
        try:
            with torch.no_grad():
                self.hf(**self.inputs)
        finally:
            for handle in handles:
                handle.remove()
        return saved

    # every block's layer_output and both its contributions, 8 prompts
    def nnterp_contributions(self) -> list:
        saved: list = []
        with torch.no_grad(), self.nnterp.trace(CACHE_PROMPTS):
            for i in range(self.layers):
                block = self.nnterp.layers[i]
                saved.append(block.self_attn.attention_output.save())
                saved.append(block.mlp.mlp_output.save())
                saved.append(block.layer_output.save())
        return saved

    def nnsight_contributions(self) -> list:
        saved: list = []
        with torch.no_grad(), self.nnsight.trace(CACHE_PROMPTS):
            for i in range(self.layers):
                block = self.ns_blocks[i]
                saved.append(getattr(block, self.attention).output[0].save())
                saved.append(block.mlp.output.save())
                saved.append(block.output.save())
        return saved

    def hooked_contributions(self) -> list:
        saved: list = []
        first = lambda _m, _i, out: saved.append(out[0] if isinstance(out, tuple) else out)  # noqa: E731
        modules = [module for block in self.hf_blocks for module in (getattr(block, self.attention), block.mlp, block)]
        handles = [module.register_forward_hook(first) for module in modules]
        try:
            with torch.no_grad():
                self.hf(**self.inputs8)
        finally:
            for handle in handles:
                handle.remove()
        return saved

    def plain_forward8(self) -> Any:
        with torch.no_grad():
            return self.hf(**self.inputs8)

    def plain_forward(self) -> Any:
        with torch.no_grad():
            return self.hf(**self.inputs)

    def nnsight_empty_trace(self) -> None:
        with torch.no_grad(), self.nnsight.trace(PROMPTS):
            pass

    def nnterp_one_read(self) -> Any:
        saved: list = []
        with torch.no_grad(), self.nnterp.trace(PROMPTS):
            saved.append(self.nnterp.layers[0].layer_output.save())
        return saved

    def nnsight_one_read(self) -> Any:
        saved: list = []
        with torch.no_grad(), self.nnsight.trace(PROMPTS):
            saved.append(self.ns_blocks[0].output.save())
        return saved

    # every block's layer_output assigned (each write checked against its layout, then against the value it replaces)
    def nnterp_layer_writes(self) -> Any:
        with torch.no_grad(), self.nnterp.trace(PROMPTS):
            for i in range(self.layers):
                self.nnterp.layers[i].layer_output = self.nnterp.layers[i].layer_output * 1.0
            logits = self.nnterp.logits.save()
        return logits

    def nnsight_layer_writes(self) -> Any:
        with torch.no_grad(), self.nnsight.trace(PROMPTS):
            for i in range(self.layers):
                self.ns_blocks[i].output = self.ns_blocks[i].output * 1.0
            logits = self.nnsight.output.logits.save()
        return logits

    def hooked_layer_writes(self) -> Any:
        handles = [block.register_forward_hook(lambda _m, _i, out: out * 1.0) for block in self.hf_blocks]
        try:
            with torch.no_grad():
                return self.hf(**self.inputs).logits
        finally:
            for handle in handles:
                handle.remove()

    # item 3: every block's attention_probabilities
    def nnterp_patterns(self) -> list:
        saved: list = []
        with torch.no_grad(), self.nnterp.trace(PROMPTS):
            for i in range(self.layers):
                saved.append(self.nnterp.layers[i].self_attn.attention_probabilities.save())
        return saved

    def nnsight_patterns(self) -> list:
        *ops, last = self.pattern_key.split(".")
        saved: list = []
        with torch.no_grad(), self.nnsight.trace(PROMPTS):
            for i in range(self.layers):
                node = getattr(self.ns_blocks[i], self.attention)
                for op in ops:
                    node = getattr(node, op)
                saved.append(getattr(node, last).save())
        return saved

    def hf_patterns(self) -> Any:
        with torch.no_grad():
            return self.hf(**self.inputs, output_attentions=True).attentions


# -- the items -------------------------------------------------------------------------


def construction(path: Path, repeats: int) -> dict[str, float]:
    from transformers import AutoModelForCausalLM

    family = StandardizedTransformer(path).family

    return interleaved(
        {
            "TransformersModel(path) (nnsight)": lambda: plain_nnsight(path, **LOAD),
            "StandardizedTransformer(path)": lambda: StandardizedTransformer(path, **LOAD),
            # the same nnsight construction handed the family's rename= and envoys= maps: what aliasing costs in nnsight
            "TransformersModel(path, rename=, envoys=) (nnsight, the family's maps)": lambda: plain_nnsight(
                path, rename=dict(family.rename), envoys=dict(family.envoys), **LOAD
            ),
            "from_pretrained(path) (transformers)": lambda: AutoModelForCausalLM.from_pretrained(path, **LOAD),
        },
        repeats,
        warmup=1,
    )


def reads(loaded: Loaded, repeats: int) -> dict[str, dict[str, float]]:
    return {
        "every block's layer_output": interleaved(
            {
                "native nnsight paths": loaded.nnsight_layer_outputs,
                "standard names": loaded.nnterp_layer_outputs,
                "forward hooks (transformers)": loaded.hooked_layer_outputs,
                "plain forward, nothing read": loaded.plain_forward,
            },
            repeats,
        ),
        "every block's layer_output assigned": interleaved(
            {
                "native nnsight paths": loaded.nnsight_layer_writes,
                "standard names (each write checked)": loaded.nnterp_layer_writes,
                "forward hooks returning the value (transformers)": loaded.hooked_layer_writes,
            },
            repeats,
        ),
        "every block's attention_probabilities": interleaved(
            {
                "nnsight source drill": loaded.nnsight_patterns,
                "standard names": loaded.nnterp_patterns,
                "output_attentions=True (transformers)": loaded.hf_patterns,
            },
            repeats,
        ),
        "one layer_output (the fixed cost of a trace)": interleaved(
            {
                "native nnsight path": loaded.nnsight_one_read,
                "standard name": loaded.nnterp_one_read,
                "empty nnsight trace": loaded.nnsight_empty_trace,
                "plain forward, nothing read": loaded.plain_forward,
            },
            repeats,
        ),
    }


#: the contributions item's title: what one trace reads, and the batch
CONTRIBUTIONS = "every block's layer_output, attention_output and mlp_output, 8 prompts"


def contributions(loaded: Loaded, repeats: int) -> dict[str, float]:
    """Every block's stream and both its contributions for a batch of 8, against forward hooks on the same 36 modules."""
    return interleaved(
        {
            "forward hooks on the same modules (transformers)": loaded.hooked_contributions,
            "standard names": loaded.nnterp_contributions,
            "native nnsight paths": loaded.nnsight_contributions,
            "plain forward, nothing read": loaded.plain_forward8,
        },
        repeats,
    )


def memory(loaded: Loaded, traces: int) -> dict[str, float]:
    """Resident memory after a few traces and after ``traces`` of them, each reading every block's layer_output."""
    for _ in range(10):
        loaded.nnterp_layer_outputs()
    gc.collect()
    early = rss_mb()
    for _ in range(traces - 10):
        loaded.nnterp_layer_outputs()
    gc.collect()
    late = rss_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"RSS after 10 traces (MB)": early, f"RSS after {traces} traces (MB)": late, "growth (MB)": late - early, "peak RSS (MB)": peak}


def kit(workers: tuple[int, ...] = (1, 2)) -> dict[str, float]:
    """Wall time of the kit (every check on every tiny checkpoint) under pytest with one and with two workers, in seconds."""
    found = {}
    root = HERE.parent
    for count in workers:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pytest", "packages/nnterp-conformance/tests/test_kit.py", "-q", "-n", str(count), "-p", "no:cacheprovider"],
            cwd=root,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        found[f"{count} worker{'s' if count > 1 else ''}"] = time.perf_counter() - start
    return found


#: item 4: every block's queries, keys, values, pattern, head outputs and both contributions
CACHED = tuple(
    f"layers.*.{name}"
    for name in (
        "self_attn.attention_queries",
        "self_attn.attention_keys",
        "self_attn.attention_values",
        "self_attn.attention_probabilities",
        "self_attn.attention_head_outputs",
        "self_attn.attention_output",
        "mlp.mlp_output",
    )
)
#: the same values under transformer-lens' hook names
LENS_HOOKS = ("hook_q", "hook_k", "hook_v", "hook_pattern", "hook_z", "hook_attn_out", "hook_mlp_out")
CACHE_PROMPTS = [f"{prompt} number {index}" for index, prompt in enumerate(PROMPTS * 4)]


class PeakRss:
    """The largest resident memory seen while the block runs, sampled every few milliseconds, over what it started at."""

    def __enter__(self) -> "PeakRss":
        import threading

        self.start = self.peak = rss_mb()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._done.wait(0.002):
            self.peak = max(self.peak, rss_mb())

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())

    @property
    def growth(self) -> float:
        return self.peak - self.start


class LiveTensors:
    """The most memory the tensors a block creates hold at once, in bytes: every new storage an op returns, until freed.

    Counted op by op under a ``TorchDispatchMode``, so the peak is exact and the
    allocator's timing (what it keeps, when it returns pages) plays no part, as
    it does in a resident-memory peak. Views share their base's storage and
    allocate nothing; tensors that existed before (the weights) are not counted.
    """

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self
        self.live: dict[int, tuple[Any, int]] = {}
        self.now = self.peak = 0

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
                out = func(*args, **(kwargs or {}))
                counter._count(out)
                return out

        self._mode = Mode()

    def _count(self, out: Any) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef
        from torch.utils._pytree import tree_leaves

        for key in [key for key, (ref, _) in self.live.items() if ref.expired()]:
            self.now -= self.live.pop(key)[1]
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and not tensor.is_meta:
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self.live and key not in self.before:
                    self.live[key] = (StorageWeakRef(storage), storage.nbytes())
                    self.now += storage.nbytes()
        self.peak = max(self.peak, self.now)

    def __enter__(self) -> "LiveTensors":
        # every storage alive now (weights, buffers) is the model's, not the run's
        import warnings

        with warnings.catch_warnings():  # isinstance on every object touches torch's deprecated aliases
            warnings.simplefilter("ignore")
            self.before = {
                obj.untyped_storage().data_ptr() for obj in gc.get_objects() if isinstance(obj, torch.Tensor) and not obj.is_meta
            }
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


def cache_runner(variant: str, path: Path) -> Callable[[], Any]:
    """A function that caches item 4's values once with ``variant``: nnterp, or transformer-lens filtered or not."""
    if variant == "nnterp":
        from nnterp.toolkit import cache_values

        model = StandardizedTransformer(path, attn_implementation="eager")
        return lambda: cache_values(model, CACHE_PROMPTS, list(CACHED), batch_size=len(CACHE_PROMPTS), progress=False)
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").eval()
    bridge = TransformerBridge.boot_transformers(str(path), hf_model=hf, tokenizer=AutoTokenizer.from_pretrained(path), device="cpu")
    wanted = (lambda name: name.endswith(LENS_HOOKS)) if variant == "lens-filtered" else None

    def run() -> Any:
        with torch.no_grad():
            return bridge.run_with_cache(CACHE_PROMPTS, names_filter=wanted)

    return run


def cache_worker(variant: str, path: Path, repeats: int) -> dict[str, float]:
    """Peak memory of one variant of item 4, in a process of its own so the peak is its own: MB over the loaded model."""
    run = cache_runner(variant, path)
    run()  # warm: weights loaded, instrumentation installed
    gc.collect()
    with PeakRss() as memory:
        for _ in range(repeats):
            result = run()
            del result
    return {"peak": memory.growth}


#: processes each caching variant's peak memory is the median over
MEMORY_PROCESSES = 7

VARIANTS = {
    "nnterp": "nnterp cache_values",
    "lens-filtered": "transformer-lens run_with_cache, the same values (names_filter)",
    "lens-everything": "transformer-lens run_with_cache, every hook",
}


def caching(path: Path, repeats: int, threads: int) -> tuple[dict[str, float], dict[str, float], dict[str, float]] | str:
    """Item 4: the variants' times interleaved in this process, each one's peak memory in a process of its own, and
    each one's peak of live tensors, counted op by op in this process."""
    import json

    try:
        runners = {VARIANTS[variant]: cache_runner(variant, path) for variant in VARIANTS}
    except ImportError:
        return "transformer-lens is not installed: run with uv run --group bench"
    times = interleaved(runners, repeats, warmup=1)
    tensors = {}
    for name, run in runners.items():
        gc.collect()
        with LiveTensors() as counted:
            result = run()
            del result
        tensors[name] = counted.peak / 2**20
    del runners
    gc.collect()
    # one process's peak swings by tens of MB with the allocator's timing: the median of several, interleaved
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS.values()}
    for _ in range(MEMORY_PROCESSES):
        for variant, name in VARIANTS.items():
            done = subprocess.run(
                [sys.executable, __file__, "--cache-worker", variant, "--repeats", "3", "--threads", str(threads)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(done.stderr[-2000:])
            samples[name].append(json.loads(done.stdout.strip().splitlines()[-1])["peak"])
    return times, {name: statistics.median(values) for name, values in samples.items()}, tensors


# -- extraction to disk ------------------------------------------------------------------

#: item 5: the residual stream of a middle and of the last block, as a dictionary's training data would be read
EXTRACTED = ("layers.5.layer_output", "layers.11.layer_output")
#: texts of the extraction items: cut to 64 tokens, 8 to a batch, 1,024 rows to a shard
EXTRACTION = dict(batch_size=8, max_length=64, shard_tokens=1024)


def extraction_texts(count: int, seed: int = 0) -> list[str]:
    import random

    words = "the tower is in paris hello world a benchmark of the standard values city of light river seine".split()
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))) for _ in range(count)]


def hooked_extraction(hf: Any, tokenizer: Any, texts: list[str], directory: Path) -> int:
    """The same rows written by hand: forward hooks on the blocks, padding dropped, the same shards; returns the rows."""
    from safetensors.torch import save_file

    blocks = [int(name.split(".")[1]) for name in EXTRACTED]
    read: dict[int, torch.Tensor] = {}
    hooks = [
        hf.transformer.h[index].register_forward_hook(
            lambda _m, _i, out, index=index: read.__setitem__(index, out[0] if isinstance(out, tuple) else out)
        )
        for index in blocks
    ]
    shard, batch_size, max_length = EXTRACTION["shard_tokens"], EXTRACTION["batch_size"], EXTRACTION["max_length"]
    buffers = {index: torch.empty((shard, hf.config.n_embd)) for index in blocks}
    filled, written, shards = 0, 0, 0

    def flush() -> None:
        nonlocal filled, shards
        save_file({f"layers.{index}.layer_output": buffer[:filled] for index, buffer in buffers.items()}, str(directory / f"{shards}.safetensors"))
        filled, shards = 0, shards + 1

    try:
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                batch = tokenizer(texts[start : start + batch_size], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
                mask = batch["attention_mask"].bool()
                # each left-padded row numbered from its first token, as nnsight does; the base model: no unembedding,
                # as nnterp stops after the last block a value needs
                hf.transformer(**batch, position_ids=(batch["attention_mask"].cumsum(1) - 1).clamp(min=0))
                rows = {index: read[index][mask] for index in blocks}
                count, offset = int(mask.sum()), 0
                while offset < count:
                    take = min(count - offset, shard - filled)
                    for index in blocks:
                        buffers[index][filled : filled + take] = rows[index][offset : offset + take]
                    filled, offset = filled + take, offset + take
                    if filled == shard:
                        flush()
                written += count
            if filled:
                flush()
    finally:
        for hook in hooks:
            hook.remove()
    return written


def extraction(path: Path, repeats: int) -> dict[str, float]:
    """Item 5: tokens per second of extract_values against forward hooks writing the same rows to the same shards, interleaved."""
    import shutil
    import tempfile

    from nnterp.toolkit.extraction import extract_values, load_activations
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = StandardizedTransformer(path)
    hf = AutoModelForCausalLM.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    texts = extraction_texts(64)
    scratch = Path(tempfile.mkdtemp(prefix="nnterp-extraction-"))
    counted: dict[str, int] = {}

    def nnterp_run() -> None:
        target = scratch / "nnterp"
        shutil.rmtree(target, ignore_errors=True)
        counted["nnterp"] = extract_values(model, texts, list(EXTRACTED), target, progress=False, **EXTRACTION).num_tokens

    def hooked_run() -> None:
        target = scratch / "hooks"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        counted["hooks"] = hooked_extraction(hf, tokenizer, texts, target)

    try:
        times = interleaved({"nnterp extract_values": nnterp_run, "forward hooks writing the same shards (transformers)": hooked_run}, repeats, warmup=1)
        if counted["nnterp"] != counted["hooks"]:
            raise RuntimeError(f"the two extractions wrote {counted['nnterp']} and {counted['hooks']} rows")
        from safetensors.torch import load_file

        ours, theirs = load_activations(scratch / "nnterp").shard(0), load_file(scratch / "hooks" / "0.safetensors")
        for name in EXTRACTED:  # the same values, row for row
            torch.testing.assert_close(ours[name], theirs[name], atol=1e-4, rtol=1e-4)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {name: counted["nnterp"] / (milliseconds / 1e3) for name, milliseconds in times.items()}


def extraction_memory_worker(path: Path) -> dict[str, float]:
    """Item 5's memory: peak RSS over 102,400 tokens of the tiny GPT-2 (every block's stream, heads and neurons), against its bound, in MB."""
    import random
    import shutil
    import tempfile

    from nnterp.toolkit.extraction import extract_values

    model = StandardizedTransformer(path, attn_implementation="eager")
    count, length, batch, shard = 1600, 64, 32, 4096
    rng = random.Random(5)
    words = "the tower is in paris hello world a b c one more eiffel city of light river seine".split()
    texts = [" ".join(rng.choice(words) for _ in range(length)) for _ in range(count)]
    names = ["layers.*.layer_output", "layers.*.self_attn.attention_head_outputs", "layers.*.mlp.mlp_neurons"]
    settings = dict(batch_size=batch, max_length=length, shard_tokens=shard, progress=False)
    scratch = Path(tempfile.mkdtemp(prefix="nnterp-extraction-"))
    try:
        extract_values(model, texts[: 3 * batch], names, scratch / "warm", **settings)
        gc.collect()
        with PeakRss() as memory:
            shards = extract_values(model, texts, names, scratch / "acts", **settings)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    row = sum(torch.empty(column["shape"], dtype=getattr(torch, column["dtype"])).nbytes for column in shards.columns.values())
    mb = 2**20
    return {
        "tokens": shards.num_tokens,
        "peak RSS growth (MB)": memory.growth,
        "shard buffer (MB)": shard * row / mb,
        "one batch of rows (MB)": batch * length * row / mb,
        "bound: the buffer, 4 batches of rows and 64 MB for the forward (MB)": (shard * row + 4 * batch * length * row) / mb + 64,
        "every row written (MB)": shards.num_tokens * row / mb,
    }


def extraction_rows(repeats: int, threads: int) -> list[str]:
    """Item 5's rows: throughput on the GPT-2-small-sized checkpoint, and memory on the tiny one (in a process of its own)."""
    import json

    title = "GPT-2 small size: extraction to disk of two blocks' layer_output (batches of 8, 64 tokens)"
    lines = rows_of(f"{title}: tokens per second", extraction(gpt2_small(), repeats), unit="tokens/s")
    done = subprocess.run(
        [sys.executable, __file__, "--extraction-memory-worker", "--threads", str(threads)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    lines.append(f"| **tiny GPT-2: extraction memory over {found.pop('tokens')} tokens** | | |")
    lines += [f"| {name} | {value:.1f} | |" for name, value in found.items()]
    return lines


#: the items, in the table's order; `--only` names some of them
ITEMS = ("construction", "reads", "contributions", "memory", "kit", "caching", "extraction", "sweeps", "overhead", "hooks")

#: the items an accelerator run measures (the others measure the CPU's resident memory, or run the kit on it)
ACCELERATOR_ITEMS = ("construction", "reads", "contributions", "sweeps")


def item_of(header: str) -> str:
    """Which item a table header (``| **GPT-2 small size: construction** | | |``) belongs to."""
    for marker, item in (
        (": construction", "construction"),
        (CONTRIBUTIONS, "contributions"),
        (": memory over", "memory"),
        ("the kit over", "kit"),
        ("queries, keys, values, pattern", "caching"),
        (": extraction", "extraction"),
        (": patching sweep", "sweeps"),
        ("what a trace adds", "overhead"),
        ("on the hooks path", "hooks"),
    ):
        if marker in header:
            return item
    return "reads"


def blocks_of(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Table lines grouped under their headers: (header, its rows), the lines before the first header under ''."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        if line.startswith("| **"):
            blocks.append((line, [line]))
        else:
            blocks[-1][1].append(line)
    return blocks


def splice_rows(text: str, rows: list[str], items: set[str], machine_line: str) -> str:
    """The README's results with the rows of ``items`` replaced by ``rows`` (each block where its old one stood, a new
    block after the one it follows in ``rows``), every other item's rows kept from the run before, the machine line new."""
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    old = text[start:end].strip("\n").splitlines()
    new = dict(blocks_of(rows)[1:])
    placed: list[tuple[str, list[str]]] = []
    for header, lines in blocks_of(old):
        if not header:
            placed.append(("", [machine_line if line.startswith("Machine:") else line for line in lines]))
        elif item_of(header) not in items:
            placed.append((header, lines))
        elif header in new:
            placed.append((header, new.pop(header)))
    previous = ""
    for header, lines in blocks_of(rows)[1:]:
        if header in new:  # not in the old table: after the block it follows here, or at the end
            where = next((index + 1 for index, (placed_header, _) in enumerate(placed) if placed_header == previous), len(placed))
            placed.insert(where, (header, new.pop(header)))
        previous = header
    table = [line for _, lines in placed for line in lines]
    return text[:start] + "\n" + "\n".join(table) + "\n" + text[end:]


# -- the table -------------------------------------------------------------------------


def rows_of(title: str, medians: dict[str, float], unit: str = "ms") -> list[str]:
    baseline = next(iter(medians.values()))
    lines = [f"| **{title}** | | |"]
    for name, value in medians.items():
        lines.append(f"| {name} | {value:.2f} {unit} | {value / baseline:.3f} |")
    return lines


def machine() -> str:
    import nnsight
    import transformers

    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}; "
        f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"nnsight {nnsight.__version__}, nnterp {nnterp.__version__}; measured {datetime.date.today().isoformat()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--repeats", type=int, default=15, help="timed repetitions of each variant (default 15)")
    parser.add_argument("--traces", type=int, default=200, help="traces for the memory item (default 200)")
    parser.add_argument("--kit", action="store_true", help="also time the kit with one and two workers")
    parser.add_argument("--write", action="store_true", help="write the rows measured into benchmarks/README.md, keeping the others")
    parser.add_argument(
        "--only", type=lambda text: text.split(","), help=f"run only these items, comma-separated: {', '.join(ITEMS)}"
    )
    parser.add_argument("--device", default="cpu", help="where the models run: cpu (default) or cuda; on cuda only " + ", ".join(ACCELERATOR_ITEMS))
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"), help="the models' dtype (float32 on the CPU, bfloat16 on cuda by default)")
    parser.add_argument("--llama-1b", action="store_true", help="also measure a Llama-shaped 1.1B-parameter model (random weights)")
    parser.add_argument("--cache-worker", choices=("nnterp", "lens-filtered", "lens-everything"), help=argparse.SUPPRESS)
    parser.add_argument("--extraction-memory-worker", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    torch.set_num_threads(arguments.threads)
    from transformers.utils import logging

    logging.disable_progress_bar()
    if arguments.cache_worker:
        import json

        print(json.dumps(cache_worker(arguments.cache_worker, gpt2_small(), arguments.repeats)))
        return 0
    if arguments.extraction_memory_worker:
        import json

        print(json.dumps(extraction_memory_worker(tiny_gpt2())))
        return 0
    items = set(arguments.only or [item for item in ITEMS if item != "kit" or arguments.kit])
    unknown = items - set(ITEMS)
    if unknown:
        parser.error(f"no item {', '.join(sorted(unknown))}; the items: {', '.join(ITEMS)}")
    few = max(3, arguments.repeats // 3)
    accelerated = arguments.device != "cpu"
    if accelerated:
        off = sorted(items - set(ACCELERATOR_ITEMS))
        if arguments.only and off:
            parser.error(f"on {arguments.device}, only {', '.join(ACCELERATOR_ITEMS)} are measured, not {', '.join(off)}")
        items &= set(ACCELERATOR_ITEMS)
        LOAD["device_map"] = arguments.device
    dtype = arguments.dtype or ("bfloat16" if accelerated else None)
    if dtype is not None:
        LOAD["dtype"] = getattr(torch, dtype)

    lines = [f"Machine: {machine()}.", "", "| item / variant | median | ratio to the item's first row |", "|---|---|---|"]
    models = [("GPT-2 small size", gpt2_small()), ("tiny GPT-2", tiny_gpt2())]
    if arguments.llama_1b:
        models.insert(1, ("Llama-shaped 1.1B", llama_1b()))
    for label, path in models:
        if not items & {"construction", "reads", "contributions", "memory"}:
            break
        print(f"== {label}", flush=True)
        if "construction" in items:
            lines += rows_of(f"{label}: construction", construction(path, few))
        if not items & {"reads", "contributions", "memory"}:
            continue
        loaded = Loaded(path)
        if "reads" in items:
            for title, medians in reads(loaded, arguments.repeats).items():
                lines += rows_of(f"{label}: {title}", medians)
        if "contributions" in items and label == "GPT-2 small size":
            lines += rows_of(f"{label}: {CONTRIBUTIONS}", contributions(loaded, arguments.repeats))
        if "memory" in items:
            usage = memory(loaded, arguments.traces)
            lines.append(f"| **{label}: memory over {arguments.traces} traces** | | |")
            lines += [f"| {name} | {value:.1f} | |" for name, value in usage.items()]
        del loaded
        gc.collect()
    if "kit" in items:
        print("== the kit", flush=True)
        lines += rows_of("the kit over every tiny checkpoint", kit(), unit="s")
    if "caching" in items:
        print("== caching", flush=True)
        cached = caching(gpt2_small(), few, arguments.threads)
        title = "GPT-2 small size: every block's queries, keys, values, pattern, head outputs and contributions, 8 prompts"
        if isinstance(cached, str):
            lines += [f"| **{title}** | | |", f"| not measured: {cached} | | |"]
        else:
            times, peaks, tensors = cached
            lines += rows_of(f"{title}: time", times)
            lines += rows_of(f"{title}: peak memory over the loaded model", peaks, unit="MB")
            lines += rows_of(f"{title}: peak of live tensors (counted op by op)", tensors, unit="MB")
    if "extraction" in items:
        print("== extraction", flush=True)
        lines += extraction_rows(few, arguments.threads)
    if "overhead" in items:
        from overhead import overhead_item

        print("== overhead", flush=True)
        lines += rows_of("tiny Llama: what a trace adds, every block's layer_output (thread CPU time)", overhead_item(max(200, arguments.repeats * 30), cpu=True))
    if "hooks" in items:
        from hooks_path import hooks_path_item

        print("== hooks", flush=True)
        for label, path, repeats in (("GPT-2 small size", gpt2_small(), arguments.repeats), ("tiny GPT-2", tiny_gpt2(), arguments.repeats * 20)):
            lines += rows_of(f"{label}: cache_values on the hooks path, every block's layer_output and contributions, 8 prompts", hooks_path_item(path, repeats))
    if "sweeps" in items:
        from sweeps import sweeps_item

        print("== sweeps", flush=True)
        for title, medians in sweeps_item(gpt2_small(), max(2, arguments.repeats // 7), interleaved, LOAD).items():
            lines += rows_of(title, medians)
    print("\n".join(lines))
    if arguments.write:
        readme = HERE / "README.md"
        readme.write_text(splice_rows(readme.read_text(), lines[4:], items, lines[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
