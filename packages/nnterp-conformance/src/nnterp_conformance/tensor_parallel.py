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
from typing import Any, Callable

#: how closely the sharded values must match the whole model's: float32 sums in another order
ATOL = 1e-5


def launch(checkpoint: str, ranks: int, extra: list[str]) -> int:
    """Run this module under ``torchrun`` with ``ranks`` processes; its exit status."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), "-m", __name__, checkpoint, *extra]
    return subprocess.call(command)


def _walk(node: Any, name: str) -> Any:
    for part in name.split("."):
        node = getattr(node, part)
    return node


def _same(whole: Any, sharded: Any) -> str | None:
    """None when the two agree, else what differs."""
    import torch

    if whole is None and sharded is None:
        return None
    if not isinstance(whole, torch.Tensor) or not isinstance(sharded, torch.Tensor):
        return f"a {type(whole).__name__} on one process, a {type(sharded).__name__} sharded"
    if whole.shape != sharded.shape:
        return f"shape {tuple(sharded.shape)} sharded, {tuple(whole.shape)} on one process"
    if not torch.allclose(whole.float(), sharded.float(), atol=ATOL):
        return f"differs by up to {(whole.float() - sharded.float()).abs().max().item():.3g}"
    return None


def agreement(whole: Any, sharded: Any, prompts: list[str]) -> list[tuple[str, str | None]]:
    """``(what, None or how it differs)`` for every comparison of ``sharded`` with ``whole``, the same checkpoint on one process."""
    import torch

    from nnterp.toolkit import cache_values, logit_lens

    rows: list[tuple[str, str | None]] = []

    def compare(what: str, read: Callable[[Any], Any]) -> None:
        values = []
        for model in (whole, sharded):
            try:
                values.append(read(model))
            except Exception as error:  # noqa: BLE001 - the row says what raised
                values.append(f"{type(error).__name__}: {error}")
        if isinstance(values[1], str) and not isinstance(values[0], str):
            rows.append((what, f"raised sharded: {values[1][:300]}"))
        elif isinstance(values[0], str):
            rows.append((what, f"raised on one process: {values[0][:300]}"))
        else:
            rows.append((what, _same(values[0], values[1])))

    def traced(reader: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def read(model: Any) -> Any:
            with torch.no_grad(), model.trace(prompts):
                value = reader(model).save()
            return value

        return read

    compare("logits", traced(lambda model: model.logits))
    for layer in range(whole.num_layers):
        for name, reason in whole.support(layer=layer).items():
            if reason is None:
                compare(f"layers[{layer}].{name}", traced(lambda model, name=name, layer=layer: _walk(model.layers[layer], name)))
    plain = traced(lambda model: model.logits)(sharded)
    for what, edit in _edits(whole):
        compare(what, traced(edit))
        # an edit that does not reach the model would agree too
        moved = not torch.allclose(traced(edit)(sharded), plain, atol=ATOL)
        rows.append((f"{what} moves the sharded logits", None if moved else "the logits did not change"))
    compare("project_on_vocab(layers[0].layer_output)", traced(lambda model: model.project_on_vocab(model.layers[0].layer_output)))
    compare("logit_lens", lambda model: logit_lens(model, prompts))
    names = ["layers.*.layer_output", "logits"]
    if whole.support(layer=whole.num_layers - 1).get("self_attn.attention_probabilities", "missing") is None:
        names.append("layers.-1.self_attn.attention_probabilities")
    for name in names:
        compare(f"cache_values {name}", lambda model, name=name: cache_values(model, prompts, names, progress=False)[name])
    return rows


def _edits(model: Any) -> list[tuple[str, Callable[[Any], Any]]]:
    """Writes to compare by the logits they lead to: in place, by assignment, on every block kind the model has."""
    support = model.support(layer=model.num_layers - 1)
    last = model.num_layers - 1
    edits = []

    def pattern(model: Any) -> Any:
        probabilities = model.layers[last].self_attn.attention_probabilities
        probabilities[:, 0] = 0  # one head silenced in place
        return model.logits

    def queries(model: Any) -> Any:
        attention = model.layers[last].self_attn
        attention.attention_queries = attention.attention_queries * 2
        return model.logits

    def expert_outputs(model: Any) -> Any:
        mlp = model.layers[last].mlp
        mlp.expert_outputs = mlp.expert_outputs * 0.5
        return model.logits

    if support.get("self_attn.attention_probabilities", "missing") is None:
        edits.append(("logits after layers[-1].self_attn.attention_probabilities[:, 0] = 0", pattern))
    if support.get("self_attn.attention_queries", "missing") is None:
        edits.append(("logits after layers[-1].self_attn.attention_queries *= 2 (assigned)", queries))
    if support.get("mlp.expert_outputs", "missing") is None:
        edits.append(("logits after layers[-1].mlp.expert_outputs *= 0.5 (assigned)", expert_outputs))
    return edits


def main(argv: list[str] | None = None) -> int:
    """One rank's part: for each checkpoint, load it whole and sharded, run the checks and the comparisons; rank 0 reports."""
    parser = argparse.ArgumentParser(prog=f"torchrun ... -m {__name__}", description=__doc__)
    parser.add_argument("checkpoint", nargs="+")
    parser.add_argument("--json", default=None, help="also write the results to this file, by checkpoint (rank 0)")
    parser.add_argument("--only", action="append", help="run only this check (repeatable)")
    arguments = parser.parse_args(argv)

    import nnterp  # noqa: F401 - nnsight before transformers.models

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world < 2:
        raise SystemExit(f"{__name__} runs under torchrun with 2 or more ranks: nnterp-conformance check {arguments.checkpoint[0]} --tensor-parallel 2")
    records = {}
    failures = 0
    for checkpoint in arguments.checkpoint:
        record = sharded_record(checkpoint, world, arguments.only)
        failures += record["failed"]
        records[checkpoint] = record
        if rank == 0:
            print("\n".join(record_lines(checkpoint, world, record)), flush=True)
    if rank == 0 and arguments.json:
        with open(arguments.json, "w") as handle:
            json.dump(records, handle, indent=2)
    return 1 if failures else 0


def sharded_record(checkpoint: str, world: int, only: list[str] | None = None) -> dict:
    """The checks' verdicts on ``checkpoint`` sharded over ``world`` ranks, and its agreement with one process."""
    from transformers import DistributedConfig

    from .runner import PROMPTS, load, run

    whole = load(checkpoint)
    sharded = load(checkpoint, distributed_config=DistributedConfig(tp_size=world))
    verdicts = run(sharded, only=only)
    rows = agreement(whole, sharded, PROMPTS)
    failed = sum(verdict.status == "fail" for verdict in verdicts) + sum(problem is not None for _, problem in rows)
    return {
        "checks": {verdict.name: {"status": verdict.status, "detail": verdict.detail} for verdict in verdicts},
        "agreement": dict(rows),
        "failed": failed,
    }


def record_lines(checkpoint: str, world: int, record: dict) -> list[str]:
    lines = [f"{checkpoint} sharded over {world} ranks", "checks:"]
    lines += [f"  {found['status'].upper():4}  {name}: {found['detail']}" for name, found in record["checks"].items()]
    lines.append("agreement with one process:")
    for what, problem in record["agreement"].items():
        lines.append(f"  {'same' if problem is None else 'DIFFERS'}  {what}{'' if problem is None else ': ' + problem}")
    lines.append(f"{record['failed']} failed")
    return lines


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
