"""The kit across ranks: every check on a checkpoint sharded with transformers' tensor parallelism, and its agreement with one process.

``nnterp-conformance check llama --tensor-parallel 2`` starts ``torchrun``
with two ranks (gloo on the CPU, NCCL where there are GPUs); each rank loads
the checkpoint sharded (``distributed_config=DistributedConfig(tp_size=2)``),
runs every check on it, and compares it with the same checkpoint loaded
whole in the same process: every available standard value of every block,
the logits after an in-place edit of the attention pattern and after an
assignment to the queries (and, on a mixture, to the expert outputs),
``project_on_vocab``, the toolkit's ``logit_lens`` and ``cache_values``.
Rank 0 prints the result; the exit status is non-zero on any failure.
Every rank runs the same code in the same order, as collectives require.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def launch(checkpoint: str, ranks: int, extra: list[str]) -> int:
    """Run this module under ``torchrun`` with ``ranks`` processes; its exit status."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(ranks),
        "-m",
        __name__,
        checkpoint,
        *extra,
    ]
    return subprocess.call(command)


def main(argv: list[str] | None = None) -> int:
    """One rank's part: for each checkpoint, load it whole and sharded, run the checks and the comparisons; rank 0 reports."""
    parser = argparse.ArgumentParser(prog=f"torchrun ... -m {__name__}", description=__doc__)
    parser.add_argument("checkpoint", nargs="+")
    parser.add_argument("--json", default=None, help="also write the results to this file, by checkpoint (rank 0)")
    parser.add_argument("--only", action="append", help="run only this check (repeatable)")
    arguments = parser.parse_args(argv)

    import nnterp  # noqa: F401 - nnsight before transformers.models

    from .agreement import record_lines

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world < 2:
        raise SystemExit(
            f"{__name__} runs under torchrun with 2 or more ranks: nnterp-conformance check {arguments.checkpoint[0]} --tensor-parallel 2"
        )
    records = {}
    failures = 0
    for checkpoint in arguments.checkpoint:
        found = sharded_record(checkpoint, world, arguments.only)
        failures += found["failed"]
        records[checkpoint] = found
        if rank == 0:
            print("\n".join(record_lines(f"{checkpoint} sharded over {world} ranks", found)), flush=True)
    if rank == 0 and arguments.json:
        with open(arguments.json, "w") as handle:
            json.dump(records, handle, indent=2)
    # on success only: a rank that raised exits at once, and torchrun stops the others rather than a barrier waiting
    _close_process_group()
    return 1 if failures else 0


def _close_process_group() -> None:
    """Wait for every rank, then destroy the process group the sharded loads started.

    Left to the interpreter's exit, gloo's group is torn down while its threads
    still run, and a rank can abort (``terminate called without an active
    exception``) after its work is done, failing the launch.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def sharded_record(checkpoint: str, world: int, only: list[str] | None = None) -> dict:
    """The checks' verdicts on ``checkpoint`` sharded over ``world`` ranks, and its agreement with one process."""
    from transformers import DistributedConfig

    from .agreement import record
    from .runner import load

    whole = load(checkpoint)
    return record(whole, load(checkpoint, distributed_config=DistributedConfig(tp_size=world)), "sharded", only)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
