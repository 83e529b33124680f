"""nnterp on vLLM's engine: every named family's values equal transformers', the flat identities hold, edits agree, mutants die.

vLLM runs in its own environment (``scripts/vllm_env.py build``: vLLM's CPU
build pins its own torch). One subprocess there runs every tiny vLLM
checkpoint and every mutant (``nnterp_conformance.vllm_run``) and saves its
values; the same runs under ``StandardizedTransformer`` happen here, on the
workspace's transformers, and ``checks.flat`` compares them. Under CI
(``NNTERP_REQUIRE_VLLM=1``) a missing environment fails; elsewhere it skips,
naming the command that builds it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import torch

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import StandardizedTransformer
from nnterp.vllm.families import FAMILIES
from nnterp_conformance.checkpoints import checkpoint_for
from nnterp_conformance.checks.flat import FLAT_CHECKS, flat_verdicts
from nnterp_conformance.engine_runs import REFUSALS, on_transformers, served
from nnterp_conformance.vllm_mutants import MUTANTS

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path(os.environ.get("NNTERP_VLLM_ENV", ROOT / ".vllm")) / "bin" / "python"
BUILD = "uv run python scripts/vllm_env.py build"
#: every tiny checkpoint of a vLLM family, with its family
CHECKPOINTS = {name: (family, tiny) for family in FAMILIES.values() for name, tiny in family.tiny.items()}

pytestmark = pytest.mark.xdist_group("vllm")


def _environment() -> None:
    if PYTHON.exists():
        return
    message = f"vLLM's environment is not built ({PYTHON} is missing): {BUILD}"
    if os.environ.get("NNTERP_REQUIRE_VLLM"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every checkpoint and mutant run on vLLM, in one process of its environment: a folder of ``NAME.pt`` (or ``.error``)."""
    _environment()
    out = tmp_path_factory.mktemp("vllm")
    items = [f"{name}={checkpoint_for(name, tiny)}" for name, (_, tiny) in CHECKPOINTS.items()]
    items += [f"{mutant}={checkpoint_for(checkpoint, CHECKPOINTS[checkpoint][1])}@{spec}" for mutant, (spec, checkpoint, _, _) in MUTANTS.items()]
    done = subprocess.run([str(PYTHON), "-m", "nnterp_conformance.vllm_run", str(out), *items], capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _run(folder: Path, name: str) -> dict:
    error = folder / f"{name}.error"
    assert not error.exists(), f"{name} failed on vLLM:\n{error.read_text()[-4000:]}"
    return torch.load(folder / f"{name}.pt")


@lru_cache(maxsize=None)
def _reference(checkpoint: str, names: tuple[str, ...]) -> dict:
    """The same run under transformers (eager attention, float32), on the values both serve."""
    model = StandardizedTransformer(str(checkpoint_for(checkpoint, CHECKPOINTS[checkpoint][1])), attn_implementation="eager")
    return on_transformers(model, [name for name in names if name in served(model)])


@pytest.mark.parametrize("check", list(FLAT_CHECKS))
@pytest.mark.parametrize("checkpoint", list(CHECKPOINTS))
def test_flat_check(engine_runs: Path, checkpoint: str, check: str) -> None:
    run = _run(engine_runs, checkpoint)
    verdict, detail = flat_verdicts(run, _reference(checkpoint, tuple(run["names"])))[check]
    assert verdict == "pass", f"{check} on {checkpoint}: {verdict}: {detail}"


@pytest.mark.parametrize("checkpoint", list(CHECKPOINTS))
def test_every_served_value_is_compared(engine_runs: Path, checkpoint: str) -> None:
    """The runs compare each block value the vLLM family serves (none left out of ``engine_runs.ORDER``)."""
    run = _run(engine_runs, checkpoint)
    served_here = {name for name, reason in run["support"].items() if reason is None}
    assert served_here == set(run["names"]), served_here ^ set(run["names"])
    assert {"layer_input", "layer_output", "self_attn.attention_output", "mlp.mlp_output"} <= served_here


@pytest.mark.parametrize("checkpoint", list(CHECKPOINTS))
def test_unserved_values_say_why(engine_runs: Path, checkpoint: str) -> None:
    """The attention's interior is unavailable on every block, with the paged kernel as the reason."""
    support = _run(engine_runs, checkpoint)["support"]
    pattern = support["self_attn.attention_probabilities"]
    assert isinstance(pattern, dict) and len(pattern) == CHECKPOINTS[checkpoint][1].config().num_hidden_layers
    assert all("paged-attention kernel" in reason for reason in pattern.values())


@pytest.mark.parametrize("mistake", list(REFUSALS))
def test_mistakes_raise_nnterps_errors(engine_runs: Path, mistake: str) -> None:
    """An unavailable read and a wrong-shaped write come back from vLLM's worker as nnterp's own errors, in standard names."""
    expected, _ = REFUSALS[mistake]
    raised, message = _run(engine_runs, "vllm_llama")["refusals"][mistake]
    assert raised == expected, message
    assert "layers[0]." in message


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_every_mutant_is_killed_by_its_check(engine_runs: Path, mutant: str) -> None:
    """A wrong vLLM family (the stream read as one half, a contribution read on the previous block) fails its named check."""
    _, checkpoint, killer, _ = MUTANTS[mutant]
    run = _run(engine_runs, mutant)
    verdict, detail = flat_verdicts(run, _reference(checkpoint, tuple(run["names"])))[killer]
    assert verdict == "fail", f"{killer} let the {mutant} mutant pass: {detail}"


def test_transformers_families_are_refused() -> None:
    """StandardizedVLLM takes a family whose modules are vLLM's, and says so before building anything."""
    from nnterp.errors import FamilyMismatch
    from nnterp.families import default
    from nnterp.vllm import StandardizedVLLM

    with pytest.raises(FamilyMismatch, match="engine='vllm'"):
        StandardizedVLLM("unused", family=default.FAMILY)


def test_vllm_families_are_refused_by_transformers() -> None:
    """StandardizedTransformer refuses a family whose modules are vLLM's, before loading anything."""
    from nnterp.errors import FamilyMismatch

    with pytest.raises(FamilyMismatch, match="engine='vllm'"):
        StandardizedTransformer("unused", family=FAMILIES["vllm_llama"])


def test_architectures_page_is_current() -> None:
    """docs/vllm-architectures.md is what scripts/vllm_architectures.py writes from this vLLM's registry."""
    _environment()
    done = subprocess.run([str(PYTHON), str(ROOT / "scripts" / "vllm_architectures.py"), "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-n", "0"]))
