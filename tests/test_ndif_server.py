"""Standard values on a real NDIF server (``scripts/ndif_stack.py``) equal a local run bit for bit, from Python 3.11 and 3.12.

The stack runs NDIF's own API, queue, controller and model actor on 127.0.0.1, Python 3.12, float32, weights frozen as
NDIF freezes them; each family's tiny checkpoint is deployed on its first request. The checks (reads, writes,
gradients, generation) live in ``tests/ndif_client.py``, which this Python imports and the stack's own Python 3.12
runs as a script. A server without nnterp (``--plain``) gets nothing: the client refuses first. Elsewhere than CI
these tests skip when no stack is running; under CI (``CI`` set) a missing stack fails them, since ``.ci/run``
starts both.
"""

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from nnterp import RemoteEnvironmentError

_spec = importlib.util.spec_from_file_location("ndif_client", Path(__file__).with_name("ndif_client.py"))
client = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(client)

pytestmark = pytest.mark.xdist_group("ndif_server")


@pytest.fixture(scope="module")
def api() -> str:
    url = client.api_or_skip()
    with client.server_threads():
        yield url


@pytest.mark.parametrize("check", list(client.CHECKS))
@pytest.mark.parametrize("name", client.FAMILIES)
def test_values_on_the_server_equal_a_local_run(api, name, check):
    assert client.compare(name, check, api) == []


def test_the_writes_took_effect_on_the_server(api):
    model = client.served("llama")
    plain, edited = client.reads(model, api, edit=False), client.reads(model, api, edit=True)
    assert not torch.equal(plain[-1], edited[-1])
    assert torch.equal(edited[3][:, -1], torch.zeros_like(edited[3][:, -1]))


def test_a_python_3_12_client_gets_the_same_values(api):
    python = client.stack()["python"]
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "UV_"))}
    ran = subprocess.run([python, str(Path(client.__file__))], capture_output=True, text=True, env=environment, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    assert report["python"].startswith("3.12.")
    assert report["differences"] == {name: {check: [] for check in client.CHECKS} for name in client.FAMILIES}


def test_a_server_without_nnterp_gets_no_request(api):
    plain = client.stack("plain")
    if plain is None:
        message = f"no NDIF stack without nnterp is running; start one with `{client.START.replace('build', 'build --plain').replace('start', 'start --plain')}`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    model = client.served("llama")
    with pytest.raises(RemoteEnvironmentError, match=r"it has no nnterp-core \(import nnterp\)") as refused:
        client.reads(model, plain["api"], edit=False)
    assert "nnterp-core==" in str(refused.value) and "Python 3.12" in str(refused.value)
    # and nothing reached its actor: no model was deployed there
    assert not client.deployed(plain)


def test_the_crash_scan_finds_a_crash(tmp_path):
    logs, ray = tmp_path / "logs", tmp_path / "ray" / "session_latest" / "logs"
    logs.mkdir(), ray.mkdir(parents=True)
    (ray / "worker-1.err").write_text("loading\nFatal Python error: Segmentation fault\n")
    record = {"logs": str(logs), "ray_temp": str(tmp_path / "ray")}
    assert len(client.crashes(record)) == 1 and "worker-1.err" in client.crashes(record)[0]


def test_the_actor_survived(api):
    assert client.crashes(client.stack()) == []
