"""The plugin, installed, leaves another project's test process as it found it; the kit's own runs get its settings."""

import json
import os
import subprocess
import sys

import pytest

#: a project of its own: one test writing what the plugin could change (torch's threads, the environment, the bars)
PROBE = """
import json, os

import nnterp  # noqa: F401 - nnsight before transformers.models
import torch
from transformers.utils import logging


def test_probe({fixture}):
    state = {{
        "threads": torch.get_num_threads(),
        "env": os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS"),
        "bars": logging.is_progress_bar_enabled(),
    }}
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(state, out)
"""
#: threads asked of torch in the probe's process (it may start with fewer, but more than one), so that a change to one shows
THREADS = 3


def probed(tmp_path, name, *options, fixture=""):
    """What the probe test saw, run by pytest (one xdist worker) in a throwaway project with ``options``."""
    project = tmp_path / name
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_probe.py").write_text(PROBE.format(fixture=fixture))
    out = project / "state.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "HF_HUB_DISABLE"))}
    env.update(PROBE_OUT=str(out), OMP_NUM_THREADS=str(THREADS))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", *options],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def untouched(tmp_path_factory):
    return probed(tmp_path_factory.mktemp("without"), "project", "-p", "no:nnterp_conformance")


def test_a_project_that_does_not_use_the_kit_keeps_its_threads_environment_and_bars(tmp_path, untouched):
    assert untouched["threads"] > 1 and untouched["env"] is None and untouched["bars"], untouched
    assert probed(tmp_path, "project") == untouched


@pytest.mark.parametrize(
    ("options", "fixture"),
    [((), "nnterp_profile"), (("--nnterp-settings",), "")],
    ids=["a kit fixture collected", "--nnterp-settings"],
)
def test_the_kits_runs_take_its_settings(tmp_path, untouched, options, fixture):
    assert probed(tmp_path, "project", *options, fixture=fixture) == {"threads": 1, "env": "1", "bars": False}
