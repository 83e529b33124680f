"""The pytest plugin (entry point ``pytest11``): the kit's checks, parametrized over tiny checkpoints.

A test that asks for the ``nnterp_checkpoint`` fixture runs once per selected
checkpoint, and one that asks for ``nnterp_check`` once per check; the kit's
own suite (``nnterp_conformance.suite``) asks for both. Every test of one
checkpoint is in one pytest-xdist group, so under ``--dist loadgroup`` a
checkpoint loads once, on one worker.

    --nnterp-checkpoint NAME_OR_PATH   only this checkpoint (repeatable)
    --nnterp-family NAME               only the registered checkpoints of this family (repeatable)
    --nnterp-shard I/N                 only the I-th of N stable shares of the checkpoints
    --nnterp-settings                  the kit's process settings for the whole run (below)

Installed, the plugin is loaded in every project's test run, and changes
nothing in it until the kit's tests run: the process settings the kit's tiny
loads need (one torch thread per xdist worker, no transformers or hub progress
bars, ``HF_HUB_DISABLE_PROGRESS_BARS=1``) are applied only where a collected
test asks for one of the kit's fixtures, an ``--nnterp-*`` option is given, or
a conftest calls ``settle(config)`` (nnterp's own workspace does).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

#: the kit's hypothesis profiles: two fixed (derandomized) examples for CI, beside the fixed prompts the report test runs every
#: check on (tests/test_report.py), and a deep random run
settings.register_profile(
    "nnterp",
    max_examples=2,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "nnterp-deep",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


#: the kit's fixtures: a test asking for one is the kit's, and its run takes the kit's process settings
KIT_FIXTURES = frozenset({"nnterp_checkpoint", "nnterp_check", "nnterp_model", "tiny_model", "nnterp_profile"})
#: the options that narrow or tune the kit's run: given one, the run is the kit's
KIT_OPTIONS = ("nnterp_checkpoint", "nnterp_family", "nnterp_shard", "nnterp_dtype", "nnterp_settings")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "nnterp_checkpoints(*names): run the kit on these checkpoints only")
    if any(config.getoption(name, None) for name in KIT_OPTIONS):
        settle(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(KIT_FIXTURES.intersection(getattr(item, "fixturenames", ())) for item in items):
        settle(config)


def settle(config: pytest.Config) -> None:
    """The kit's process settings, once per process: no progress bar per tiny load, and one torch thread per xdist worker.

    No "Loading weights" bar: through the environment for this process's later
    imports and the processes tests start, and directly where transformers is
    already imported. One thread per worker: tiny models gain nothing from
    intra-op threads, and two workers each spinning two on two cores slow each
    other several-fold. Called by the plugin for the kit's runs only (see the
    module's docstring); a conftest calls it to give a whole run these settings.
    """
    if getattr(config, "_nnterp_settled", False):
        return
    config._nnterp_settled = True  # type: ignore[attr-defined]
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        from transformers.utils import logging

        logging.disable_progress_bar()
    if hasattr(config, "workerinput"):
        import torch

        torch.set_num_threads(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nnterp", "nnterp conformance kit")
    group.addoption(
        "--nnterp-checkpoint",
        action="append",
        default=[],
        metavar="NAME_OR_PATH",
        help="check only this checkpoint (repeatable)",
    )
    group.addoption(
        "--nnterp-family",
        action="append",
        default=[],
        metavar="NAME",
        help="check only the registered checkpoints of this family (repeatable)",
    )
    group.addoption(
        "--nnterp-shard", default=None, metavar="I/N", help="check only the I-th of N stable shares of the checkpoints"
    )
    group.addoption(
        "--nnterp-dtype",
        default=None,
        metavar="DTYPE",
        choices=("float32", "bfloat16", "float16"),
        help="load the kit's checkpoints in this dtype (default: as each is registered, float32)",
    )
    group.addoption(
        "--nnterp-settings",
        action="store_true",
        default=False,
        help="give this whole run the kit's process settings (one torch thread per xdist worker, no transformers or hub "
        "progress bars); without it they apply only when the kit's fixtures are collected or another --nnterp-* option is given",
    )


def family_of(checkpoint: str) -> str | None:
    """The short name of the family serving a registered checkpoint, read from the entry points (nothing loads)."""
    from nnterp.registry import checkpoint_family

    return checkpoint_family(checkpoint)


def in_shard(checkpoint: str, shard: str) -> bool:
    """Whether ``checkpoint`` falls in shard ``I/N`` (1-based), by a hash of its name: stable as checkpoints come and go."""
    index, count = (int(part) for part in shard.split("/"))
    if not 1 <= index <= count:
        raise pytest.UsageError(f"--nnterp-shard {shard}: I must be between 1 and N")
    return int(hashlib.sha256(checkpoint.encode()).hexdigest(), 16) % count == index - 1


def selected(config: pytest.Config, marked: tuple[str, ...] = ()) -> list[str]:
    """The checkpoints a test checks: the ones named, else every registered one, narrowed by family, marker and shard."""
    from .checkpoints import names

    chosen = list(config.getoption("nnterp_checkpoint")) or names()
    if marked:
        chosen = [name for name in chosen if name in marked]
    families = config.getoption("nnterp_family")
    if families:
        registered = set(names())
        chosen = [name for name in chosen if name in registered and family_of(name) in families]
    shard = config.getoption("nnterp_shard")
    if shard:
        chosen = [name for name in chosen if in_shard(name, shard)]
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wants_checkpoint = "nnterp_checkpoint" in metafunc.fixturenames
    wants_check = "nnterp_check" in metafunc.fixturenames
    if wants_check:
        from .checks import CHECKS, load_plugins

        load_plugins()
    if not wants_checkpoint:
        if wants_check:
            metafunc.parametrize("nnterp_check", list(CHECKS), scope="session")
        return
    marker = metafunc.definition.get_closest_marker("nnterp_checkpoints")
    chosen = selected(metafunc.config, marker.args if marker else ())
    if not wants_check:
        params = [pytest.param(name, id=name, marks=pytest.mark.xdist_group(name)) for name in chosen]
        metafunc.parametrize("nnterp_checkpoint", params, scope="session")
        return
    # a (checkpoint, check) pair is a test only where the check applies: a skip is then always a reason to read
    found = applicable_in_turn(chosen)
    pairs = [
        pytest.param(name, check, id=f"{name}-{check}", marks=pytest.mark.xdist_group(name))
        for name in chosen
        for check in found[name]
    ]
    metafunc.parametrize(("nnterp_checkpoint", "nnterp_check"), pairs, scope="session")


def applicable_in_turn(chosen: list[str]) -> dict[str, tuple[str, ...]]:
    """The checks that apply to each checkpoint, each xdist worker starting at its own share (so the first run's work splits)."""
    from .applicability import applicable

    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index, count = int(worker.removeprefix("gw") or 0), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    start = len(chosen) * index // max(count, 1)
    return {name: applicable(name) for name in chosen[start:] + chosen[:start]}


@pytest.fixture(scope="session")
def tiny_model() -> Callable[..., Any]:
    """Load a checkpoint by registered name or path, once per session and set of load arguments.

    ``tiny_model("gpt2")`` is the checkpoint as registered (eager attention);
    ``tiny_model("llama", attn_implementation="sdpa")`` another load of it.
    """
    from .runner import load

    loaded: dict[tuple, Any] = {}

    def get(name: str, **kwargs: Any) -> Any:
        key = (name, tuple(sorted(kwargs.items())))
        if key not in loaded:
            loaded[key] = load(name, **kwargs)
        return loaded[key]

    return get


@pytest.fixture(scope="session")
def nnterp_model(tiny_model: Callable[..., Any], nnterp_checkpoint: str, pytestconfig: pytest.Config) -> Any:
    """The model of the checkpoint this test is parametrized over, in ``--nnterp-dtype`` where given."""
    dtype = pytestconfig.getoption("nnterp_dtype")
    if dtype is None:
        return tiny_model(nnterp_checkpoint)
    import torch

    return tiny_model(nnterp_checkpoint, dtype=getattr(torch, dtype))


@pytest.fixture(scope="session")
def nnterp_profile(pytestconfig: pytest.Config) -> settings:
    """The hypothesis settings the kit's drawn examples run under: ``--hypothesis-profile`` if given, else ``nnterp``."""
    return settings.get_profile(pytestconfig.getoption("hypothesis_profile", None) or "nnterp")
