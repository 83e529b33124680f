"""The ``nnterp-conformance`` command: a checkpoint's support table and each check's verdict."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def support_lines(support: dict[str, Any]) -> list[str]:
    """One line per value: ``available``, the reason, or the reason per block where it varies."""
    width = max((len(name) for name in support), default=0)
    lines = []
    for name, reasons in support.items():
        if reasons is None:
            lines.append(f"  {name:{width}}  available")
        elif isinstance(reasons, str):
            lines.append(f"  {name:{width}}  unavailable: {reasons}")
        else:
            groups: dict[str, list[int]] = {}
            for layer, reason in reasons.items():
                groups.setdefault(reason, []).append(layer)
            for reason, layers in groups.items():
                lines.append(f"  {name:{width}}  unavailable on layers {layers}: {reason}")
    return lines


def check_command(arguments: argparse.Namespace) -> int:
    from nnterp.registry import family_module

    if arguments.tensor_parallel:
        from .tensor_parallel import launch

        extra = [flag for name in arguments.only or [] for flag in ("--only", name)]
        return launch(str(arguments.checkpoint), arguments.tensor_parallel, extra)

    if arguments.offload:
        from .agreement import record_lines
        from .offload import offloaded_record

        devices = tuple(arguments.offload.split(","))
        if len(devices) != 2:
            raise SystemExit(
                f"--offload takes two devices, the first half's and the second's: cpu,disk or cuda:0,cuda:1 (got {arguments.offload!r})"
            )
        found = offloaded_record(str(arguments.checkpoint), arguments.only, devices)
        if arguments.json:
            print(json.dumps(found, indent=2))
        else:
            split = ", ".join(f"{name}: {device}" for name, device in found["device_map"].items())
            print(
                "\n".join(record_lines(f"{arguments.checkpoint} split over {' and '.join(devices)} ({split})", found))
            )
        return 1 if found["failed"] else 0

    from .runner import load, run

    kwargs = {} if arguments.attn_implementation is None else {"attn_implementation": arguments.attn_implementation}
    model = load(arguments.checkpoint, **kwargs)
    support = model.support()
    verdicts = run(model, only=arguments.only)
    failed = [verdict for verdict in verdicts if verdict.status == "fail"]
    if arguments.json:
        record = {
            "checkpoint": str(arguments.checkpoint),
            "model_type": model._module.config.model_type,
            "family": family_module(model.family),
            "support": {name: _jsonable(reasons) for name, reasons in support.items()},
            "checks": {verdict.name: {"status": verdict.status, "detail": verdict.detail} for verdict in verdicts},
        }
        print(json.dumps(record, indent=2))
    else:
        print(f"{arguments.checkpoint}: {model._module.config.model_type}, family {family_module(model.family)}")
        print("values:")
        print("\n".join(support_lines(support)))
        print("checks:")
        for verdict in verdicts:
            print(f"  {verdict}")
        passed = sum(verdict.status == "pass" for verdict in verdicts)
        skipped = sum(verdict.status == "skip" for verdict in verdicts)
        print(f"{passed} passed, {len(failed)} failed, {skipped} skipped")
    return 1 if failed else 0


def _jsonable(reasons: Any) -> Any:
    return {str(layer): reason for layer, reason in reasons.items()} if isinstance(reasons, dict) else reasons


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnterp-conformance", description=__doc__)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{check,list,report,mutants,upgrade-report}"
    )
    check = commands.add_parser("check", help="print a checkpoint's support table and run every check on it")
    check.add_argument(
        "checkpoint", help="a registered tiny checkpoint's name (gpt2, llama, ...) or a checkpoint directory"
    )
    check.add_argument("--json", action="store_true", help="print one JSON record instead of the table")
    check.add_argument("--only", action="append", help="run only this check (repeatable)")
    check.add_argument("--attn-implementation", default=None, help="load with this attention implementation")
    check.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch threads (default: 1 on a registered tiny checkpoint, torch's own default on a directory)",
    )
    check.add_argument(
        "--tensor-parallel",
        type=int,
        default=None,
        metavar="RANKS",
        help="run the checks on the checkpoint sharded over RANKS processes (torchrun) and compare it with one process",
    )
    check.add_argument(
        "--offload",
        nargs="?",
        const="cpu,disk",
        default=None,
        metavar="FIRST,SECOND",
        help="run the checks on the checkpoint split by device_map, half its blocks on each device (default cpu,disk), "
        "and compare it with one device",
    )
    commands.add_parser("list", help="list the registered tiny checkpoints")
    report = commands.add_parser(
        "report", help="run the kit on every registered checkpoint and write docs/families.{json,md}"
    )
    report.add_argument("--out", default="docs", help="the folder to write into (default: docs)")
    report.add_argument(
        "--check", action="store_true", help="write nothing; exit non-zero if the files there are stale"
    )
    report.add_argument("--jobs", type=int, default=1, help="processes sharing the checkpoints (default: 1)")
    mutants = commands.add_parser(
        "mutants", help="run the standard mutants on checkpoints and print which checks kill them"
    )
    mutants.add_argument("checkpoint", nargs="+", help="registered tiny checkpoints' names or checkpoint directories")
    upgrade = commands.add_parser(
        "upgrade-report",
        help="run the kit in a scratch environment with another transformers release and report what moved, per family",
    )
    upgrade.add_argument("--transformers", required=True, metavar="X.Y.Z", help="the transformers release to try")
    upgrade.add_argument(
        "--env",
        default=None,
        metavar="DIR",
        help="build (or reuse) the scratch environment here and keep it (default: a temporary folder)",
    )
    upgrade.add_argument(
        "--checkpoint",
        action="append",
        default=None,
        metavar="NAME",
        help="a registered checkpoint to run (repeatable; default: every one)",
    )
    upgrade.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="where to write the Markdown (default: nnterp-upgrade/upgrade-report-X.Y.Z.md in the system's temporary folder)",
    )
    upgrade.add_argument(
        "--baseline",
        default=None,
        metavar="FILE",
        help="a families.json to compare with, instead of running the kit on the checkpoints in this environment",
    )
    upgrade.add_argument(
        "--jobs",
        type=processes,
        default=1,
        metavar="N",
        help="processes sharing the checkpoints, on each side: the release's and this environment's (default: 1)",
    )
    # the radar's own: the raw records of this environment's release (what upgrade-report runs on both sides)
    records = commands.add_parser("records")
    records.add_argument("--checkpoint", action="append", default=None)
    records.add_argument("--json", required=True)
    records.add_argument("--jobs", type=processes, default=1)
    arguments = parser.parse_args(argv)
    _set_threads(arguments)
    if arguments.command == "upgrade-report":
        from pathlib import Path

        from .upgrade import upgrade_report

        return upgrade_report(
            arguments.transformers,
            env=None if arguments.env is None else Path(arguments.env),
            checkpoints=arguments.checkpoint,
            out=None if arguments.out is None else Path(arguments.out),
            baseline=None if arguments.baseline is None else Path(arguments.baseline),
            jobs=arguments.jobs,
        )
    if arguments.command == "records":
        from pathlib import Path

        from .upgrade import records_command

        return records_command(arguments.checkpoint, Path(arguments.json), arguments.jobs)
    if arguments.command == "mutants":
        return mutants_command(arguments)
    if arguments.command == "list":
        from .checkpoints import names

        print("\n".join(names()))
        return 0
    if arguments.command == "report":
        return report_command(arguments)
    return check_command(arguments)


def processes(text: str) -> int:
    """A ``--jobs`` value: a number of processes, 1 or more."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"a number of processes, 1 or more (got {text!r})")
    return count


def _set_threads(arguments: argparse.Namespace) -> None:
    """One torch thread on the kit's tiny checkpoints, unless ``--threads`` says otherwise.

    Their matrices are too small to split: a second intra-op thread buys
    nothing, and on contended cores it slows a check run several-fold (4.9 s
    against 0.7 s for gpt2's checks on this 2-core machine under load). A
    checkpoint directory keeps torch's default.
    """
    threads = getattr(arguments, "threads", None)
    if threads is None and arguments.command == "check":
        from .checkpoints import registered

        threads = 1 if registered(str(arguments.checkpoint)) else None
    elif threads is None and arguments.command in ("mutants", "report", "records"):
        threads = 1
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def mutants_command(arguments: argparse.Namespace) -> int:
    """Each standard mutant of each checkpoint, killed or surviving, then the score; non-zero while one survives."""
    from .mutants import score, standard_mutants

    def progress(mutant: Any, found: Any) -> None:
        kill = found.status == "fail" and mutant.message in found.detail
        print(
            f"{'killed  ' if kill else 'SURVIVES'}  {mutant.name}  [{mutant.check}]  {found.detail if kill else mutant.reason}"
        )

    chosen = [mutant for checkpoint in arguments.checkpoint for mutant in standard_mutants(checkpoint)]
    kills, total = score(chosen, progress)
    print(f"mutation score: {kills}/{total} ({100 * kills / total:.0f}%)")
    return 0 if kills == total else 1


def report_command(arguments: argparse.Namespace) -> int:
    from pathlib import Path

    from .report import collect, stale, write

    records = collect(jobs=arguments.jobs)
    directory = Path(arguments.out)
    if arguments.check:
        outdated = stale(records, directory)
        for name in outdated:
            print(f"{directory / name} is stale: run uv run nnterp-conformance report")
        return 1 if outdated else 0
    readme = directory.resolve().parent / "README.md"
    write(records, directory, readme)
    print(f"wrote {directory / 'families.json'}, {directory / 'families.md'} and the headline of {readme}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
