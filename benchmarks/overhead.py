"""The fixed cost of a trace at the limit: what nnterp adds to one nnsight trace on a tiny model (issue 42).

    uv run python benchmarks/overhead.py                   # the medians and ratios
    uv run python benchmarks/overhead.py --repeats 1000
    uv run python benchmarks/overhead.py --cpu             # this thread's CPU time, not wall time (a loaded machine)
    uv run python benchmarks/overhead.py --profile         # where nnterp's extra time goes, by function
    uv run python benchmarks/overhead.py --profile --traces 500 --top 40

On the tiny Llama (``nnterp_conformance``'s ``tiny_checkpoint("llama")``), one
torch thread, the variants interleaved (``run.interleaved``): a plain forward,
forward hooks reading every block, an empty nnsight trace, native nnsight reads
of every block (``model.model.layers[i].output``) and the same blocks read by
standard name (``model.layers[i].layer_output``). The model is so small that
the forward costs about as much as the trace around it, so the ratios are the
per-trace overhead itself, not what a real model pays. ``--cpu`` times each
variant by this thread's CPU time (``time.thread_time``) instead of wall time:
the same work, less moved by other processes on a shared machine (nnsight runs
the intervention on greenlets of this thread, and torch has one thread).

``--profile`` runs cProfile over N standard-name traces and N native ones and
prints the function calls per trace of each, then the functions under
``packages/nnterp-*/src`` by cumulative and by own time in the standard-name run.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import Loaded, interleaved  # noqa: E402


LABELS = {
    "forward": "plain forward",
    "hooks": "forward hooks, every block",
    "empty": "empty nnsight trace",
    "native": "nnsight reads, every block",
    "standard": "nnterp reads, every block",
}


def variants(loaded: Loaded) -> dict[str, Callable[[], Any]]:
    """The five variants, by row label, on the tiny Llama loaded three ways (``run.Loaded``)."""
    methods = {
        "forward": loaded.plain_forward,
        "hooks": loaded.hooked_layer_outputs,
        "empty": loaded.nnsight_empty_trace,
        "native": loaded.nnsight_layer_outputs,
        "standard": loaded.nnterp_layer_outputs,
    }
    return {LABELS[name]: methods[name] for name in LABELS}


def tiny_llama() -> Loaded:
    from nnterp_conformance.checkpoints import tiny_checkpoint

    return Loaded(tiny_checkpoint("llama"))


def overhead_item(repeats: int = 500, cpu: bool = False) -> dict[str, float]:
    """Median milliseconds of each variant, keyed by row label, the variants interleaved on one torch thread.

    ``cpu``: by this thread's CPU time rather than wall time.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tiny = tiny_llama()
        standard, native = tiny.nnterp_layer_outputs(), tiny.nnsight_layer_outputs()
        assert all(torch.equal(a, b) for a, b in zip(standard, native)), "the two reads must serve the same tensors"
        return interleaved(variants(tiny), repeats, warmup=20, clock=time.thread_time if cpu else time.perf_counter)
    finally:
        torch.set_num_threads(threads)


def _ours(filename: str) -> bool:
    return "/packages/nnterp-" in filename and "/src/" in filename


def profile(traces: int, top: int) -> None:
    """cProfile over ``traces`` standard-name and native traces: calls per trace, and nnterp's functions by time."""
    torch.set_num_threads(1)
    tiny = tiny_llama()
    reads = {"native": tiny.nnsight_layer_outputs, "standard": tiny.nnterp_layer_outputs}
    for _ in range(20):
        reads["standard"](), reads["native"]()
    results = {}
    for name in ("native", "standard"):
        profiler = cProfile.Profile()
        run = reads[name]
        profiler.enable()
        for _ in range(traces):
            run()
        profiler.disable()
        results[name] = pstats.Stats(profiler)
    print(f"# {traces} traces each, tiny Llama ({tiny.layers} blocks), one torch thread\n")
    for name, stats in results.items():
        print(f"{LABELS[name]:<32} {stats.total_calls / traces:8.0f} function calls per trace ({stats.prim_calls / traces:.0f} primitive)")
    extra = results["standard"].total_calls - results["native"].total_calls
    print(f"{'nnterp adds':<32} {extra / traces:8.0f} function calls per trace\n")
    stats = results["standard"].stats  # (file, line, function) -> (primitive calls, calls, own time, cumulative, callers)
    ours = [(key, value) for key, value in stats.items() if _ours(key[0])]
    own_total = sum(value[2] for _, value in ours)
    calls = sum(value[1] for _, value in ours)
    print(f"nnterp's own functions: {calls / traces:.0f} calls, {own_total / traces * 1e3:.3f} ms own time per trace (under the profiler)\n")
    for title, column in (("cumulative", 3), ("own time", 2)):
        print(f"## nnterp's functions by {title} per trace (calls per trace, own ms, cumulative ms)")
        for (filename, line, function), value in sorted(ours, key=lambda item: -item[1][column])[:top]:
            short = filename.split("/src/", 1)[-1]
            print(f"{value[1] / traces:7.1f} {value[2] / traces * 1e3:8.4f} {value[3] / traces * 1e3:8.4f}  {short}:{line}({function})")
        print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=500, help="interleaved rounds (default 500)")
    parser.add_argument("--cpu", action="store_true", help="time by this thread's CPU time instead of wall time")
    parser.add_argument("--profile", action="store_true", help="profile nnterp's traces instead of timing them")
    parser.add_argument("--traces", type=int, default=300, help="traces profiled per variant (default 300)")
    parser.add_argument("--top", type=int, default=25, help="functions listed per table (default 25)")
    options = parser.parse_args()
    if options.profile:
        profile(options.traces, options.top)
        return
    medians = overhead_item(options.repeats, options.cpu)
    base = medians[LABELS["forward"]]
    native = medians[LABELS["native"]]
    clock = "thread CPU time" if options.cpu else "wall time"
    print(f"# tiny Llama, one torch thread, {options.repeats} interleaved rounds, medians of {clock}\n")
    print(f"{'variant':<32} {'ms':>7} {'x forward':>10} {'x nnsight reads':>16}")
    for label, ms in medians.items():
        print(f"{label:<32} {ms:7.3f} {ms / base:9.2f}x {ms / native:15.2f}x")


if __name__ == "__main__":
    main()
