"""Run tiny checkpoints on vLLM and save what the kit compares (``engine_runs.on_vllm``), one file per checkpoint.

    python -m nnterp_conformance.vllm_run OUT_DIR NAME=CHECKPOINT_DIR[@FAMILY] ...

Run by the vLLM environment's Python (``scripts/vllm_env.py``): every engine in
one process, one after the other, so vLLM is imported once. ``FAMILY`` is a
family spec ``StandardizedVLLM`` takes (a name in ``nnterp.vllm.families``, or
``"module:NAME"``: a mutant's); by default the checkpoint's ``model_type``
finds it. Writes ``OUT_DIR/NAME.pt``, or ``OUT_DIR/NAME.error`` with the
traceback where the run failed, and goes on.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: vLLM's engine in this process, on the CPU build's defaults: float32 so values can equal transformers'
ENGINE: dict[str, Any] = {"dtype": "float32", "max_model_len": 256, "kv_cache_memory_bytes": 64 * 1024**2, "seed": 0}


def main(argv: list[str]) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import nnterp  # noqa: F401 - nnsight before transformers.models
    from nnterp.vllm import StandardizedVLLM

    import torch

    from .engine_runs import on_vllm, refusals_on_vllm, served

    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for item in argv[1:]:
        name, _, rest = item.partition("=")
        checkpoint, _, family = rest.partition("@")
        started = time.time()
        model = None
        try:
            model = StandardizedVLLM(checkpoint, family=family or None, dispatch=True, **ENGINE)
            names = served(model)
            run = on_vllm(model, names)
            run["support"] = model.support()
            run["refusals"] = refusals_on_vllm(model)
            torch.save(run, out / f"{name}.pt")
            print(f"vllm_run: {name} in {time.time() - started:.1f} s", flush=True)
        except Exception:  # noqa: BLE001 - one checkpoint's failure is its own result; the others still run
            (out / f"{name}.error").write_text(traceback.format_exc())
            print(f"vllm_run: {name} failed", flush=True)
        finally:
            # the next engine in this process brings up its own process groups (a mixture needs an expert group)
            engine = getattr(model, "vllm_entrypoint", None) if model is not None else None
            if engine is not None:
                engine.llm_engine.engine_core.shutdown()
            model = engine = None
            gc.collect()
            StandardizedVLLM._cleanup_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
