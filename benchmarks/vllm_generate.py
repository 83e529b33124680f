"""Tokens per second generating on vLLM: plain, through nnterp, reading every block's stream, and transformers with nnterp.

    .vllm/bin/python benchmarks/vllm_generate.py            # prints the table
    .vllm/bin/python benchmarks/vllm_generate.py --write    # and puts it in benchmarks/README.md

Run by vLLM's environment (``uv run python scripts/vllm_env.py build``), which
has transformers and nnterp beside vLLM. One checkpoint (a Llama of width 512,
8 blocks, head_dim 64, float32, random weights written locally), one batch of
four prompts, greedy, ``ignore_eos`` so every variant makes the same tokens;
the variants interleaved over ``--repeats`` rounds, medians reported with
each one's ratio to vLLM's own ``LLM.generate``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import nnterp  # noqa: E402,F401 - nnsight before transformers.models
import torch  # noqa: E402
from nnterp.tiny import TinyConfig  # noqa: E402
from nnterp_conformance.checkpoints import checkpoint_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = TinyConfig("llama", {"hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64})
PROMPTS = ["The Eiffel Tower is in", "Once upon a time there was", "The capital of Japan is", "In 1905 Einstein wrote"]
MARKERS = ("<!-- vllm-generate -->", "<!-- /vllm-generate -->")


def plain_vllm(model, tokens: int) -> None:
    from vllm import SamplingParams

    model.vllm_entrypoint.generate(PROMPTS, SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True), use_tqdm=False)


def nnterp_vllm(model, tokens: int) -> None:
    with model.trace(temperature=0.0, max_tokens=tokens, ignore_eos=True) as tracer:
        for prompt in PROMPTS:
            with tracer.invoke(prompt):
                pass


def nnterp_vllm_streams(model, tokens: int) -> None:
    import nnsight

    with model.trace(temperature=0.0, max_tokens=tokens, ignore_eos=True) as tracer:
        for prompt in PROMPTS:
            with tracer.invoke(prompt):
                streams = nnsight.save([])
                for _ in tracer.iter[:]:
                    streams.append([block.layer_output.clone() for block in model.layers])


def transformers_streams(model, tokens: int) -> None:
    import nnsight

    with model.generate(PROMPTS, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False) as tracer:
        streams = nnsight.save([])
        for _ in tracer.iter[:]:
            streams.append([block.layer_output.clone() for block in model.layers])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    arguments = parser.parse_args()

    from nnterp import StandardizedTransformer
    from nnterp.vllm import StandardizedVLLM

    path = str(checkpoint_for("bench_llama_512", CHECKPOINT))
    engine = StandardizedVLLM(path, dispatch=True, dtype="float32", max_model_len=256, kv_cache_memory_bytes=256 * 1024**2, seed=0)
    reference = StandardizedTransformer(path, dispatch=True)
    variants = {
        "vLLM `LLM.generate`": (plain_vllm, engine),
        "`StandardizedVLLM.trace`, nothing read": (nnterp_vllm, engine),
        "`StandardizedVLLM.trace`, every block's `layer_output` each step": (nnterp_vllm_streams, engine),
        "transformers `generate` with nnterp, every block's `layer_output` each step": (transformers_streams, reference),
    }
    for run, model in variants.values():  # warm up: the first call of each compiles and allocates
        run(model, 2)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(arguments.repeats):
        for name, (run, model) in variants.items():
            started = time.perf_counter()
            run(model, arguments.tokens)
            times[name].append(time.perf_counter() - started)
    made = len(PROMPTS) * arguments.tokens
    base = statistics.median(times[next(iter(variants))])
    rows = [
        "| variant | median s | tokens/s | time vs vLLM |",
        "|---|---:|---:|---:|",
        *(f"| {name} | {statistics.median(seconds):.3f} | {made / statistics.median(seconds):.0f} | {statistics.median(seconds) / base:.2f}x |" for name, seconds in times.items()),
    ]
    import vllm

    load = os.getloadavg()[0]
    machine = (
        f"{len(PROMPTS)} prompts x {arguments.tokens} new tokens, {arguments.repeats} rounds; vLLM {vllm.__version__} (CPU build), torch "
        f"{torch.__version__}, {os.cpu_count()} cores, load average {load:.1f}, {time.strftime('%Y-%m-%d')}"
    )
    table = "\n".join([*rows, "", machine])
    print(table)
    if arguments.write:
        readme = ROOT / "benchmarks" / "README.md"
        text = readme.read_text()
        block = f"{MARKERS[0]}\n{table}\n{MARKERS[1]}"
        pattern = re.compile(re.escape(MARKERS[0]) + ".*?" + re.escape(MARKERS[1]), re.S)
        if not pattern.search(text):
            sys.exit(f"benchmarks/README.md has no {MARKERS[0]} ... {MARKERS[1]} block to replace")
        readme.write_text(pattern.sub(lambda _: block, text))


if __name__ == "__main__":
    main()
