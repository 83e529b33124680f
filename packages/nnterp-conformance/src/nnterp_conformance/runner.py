"""Load a checkpoint the kit knows (by name or path) and run every check on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the prompts the command line and the report check with: two lengths, so a batch is padded
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]


def load(name_or_path: str | Path, **kwargs: Any) -> Any:
    """A ``StandardizedTransformer`` on a registered tiny checkpoint (by name) or a checkpoint directory.

    A registered checkpoint is loaded with the keyword arguments it declares
    (eager attention); a directory with ``attn_implementation="eager"`` unless
    ``kwargs`` say otherwise, so that the attention's interior can be checked.
    Neither proves its family at load (``verify=False``): the kit is the
    proof, and a value the proof withdrew would hide from it what it checks
    (on a new release, the operation that moved).
    """
    from nnterp import StandardizedTransformer

    from transformers.utils import logging

    from .checkpoints import names, registered, spec, tiny_checkpoint

    logging.disable_progress_bar()  # a bar per tiny load drowns the kit's own output

    if registered(str(name_or_path)):
        load_kwargs = {"verify": False, **spec(str(name_or_path)).load, **kwargs}
        return StandardizedTransformer(tiny_checkpoint(str(name_or_path)), **load_kwargs)
    path = Path(name_or_path)
    if not path.exists():
        raise LookupError(
            f"{name_or_path!r} is neither a registered tiny checkpoint ({', '.join(names())}) nor a directory"
        )
    return StandardizedTransformer(path, **{"attn_implementation": "eager", "verify": False, **kwargs})


def run(model: Any, case: Any = None, only: list[str] | None = None) -> list[Any]:
    """The verdict of every registered check that applies to ``model`` (or those named in ``only``), in order.

    A check whose ``applies`` raises (it asks ``support()``, and a value's reason raised) fails with what raised,
    as a check that crashes does: one broken value does not take every other check with it.
    """
    from .checks import CHECKS, verdict
    from .checks.base import crashed

    case = PROMPTS if case is None else case
    verdicts = []
    for name, found in CHECKS.items():
        if only is not None and name not in only:
            continue
        try:
            applies = found.applies_to(model)
        except Exception as error:  # noqa: BLE001 - deciding whether it applies raised: the check fails with that
            verdicts.append(crashed(name, error))
            continue
        if applies:
            verdicts.append(verdict(name, model, case))
    return verdicts


def assert_conforms(model: Any, case: Any = None, skips: Any = ()) -> list[Any]:
    """Assert that every check passes on ``model``, but those in ``skips``, which must skip.

    ``skips`` names the checks a family's unavailable values make skip, or maps
    each to a fragment its reason must contain. Returns the verdicts. This is
    the assertion a family's own test file makes.
    """
    verdicts = run(model, case)
    failed = [str(verdict) for verdict in verdicts if verdict.status == "fail"]
    assert not failed, "\n".join(failed)
    skipped = {verdict.name: verdict.detail for verdict in verdicts if verdict.status == "skip"}
    expected = skips if isinstance(skips, dict) else dict.fromkeys(skips, "")
    assert skipped.keys() == expected.keys(), f"skipped {sorted(skipped)}, expected {sorted(expected)}"
    for name, fragment in expected.items():
        assert fragment in skipped[name], f"{name} skipped for {skipped[name]!r}, expected a reason with {fragment!r}"
    return verdicts
