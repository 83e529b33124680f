"""A remote trace names nnterp's classes by reference and goes only to a server whose ``/env`` has the same nnterp.

The server is a real HTTP server on 127.0.0.1 that answers ``GET /env`` with
the environment a test gives it, takes ``POST /request`` (answering RECEIVED,
as NDIF does) and records every path asked of it. The last test runs the
payload it received on another Python (3.12), as an NDIF model actor would.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
import zstandard
from cloudpickle.cloudpickle import _PICKLE_BY_VALUE_MODULES
from nnsight.intervention.backends.local import LocalSimulationBackend
from nnsight.modeling import huggingface
from nnsight.ndif import get_local_env
from nnsight.schema import request as nnsight_request
from nnterp import StandardizedTransformer
from nnterp._remote import Checked, distribution, family_packages, globals_named, installed, needed, ours
from nnterp.errors import RemoteEnvironmentError
from nnterp_conformance import tiny_checkpoint

pytestmark = pytest.mark.xdist_group("llama")
PROMPTS = ["The Eiffel Tower is in Paris, the", "Hello world"]
REPO = Path(__file__).resolve().parents[3]
SERVER_PYTHON = "3.12.1 (main, Jan  1 2026, 00:00:00) [GCC 12.2.0]"


class Server:
    """``GET /env`` answers ``env``; ``POST /request`` keeps its blob and answers RECEIVED; ``paths`` lists every request."""

    def __init__(self, env: dict) -> None:
        self.env, self.paths, self.blobs = env, [], []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def answer(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                server.paths.append(("GET", self.path))
                if self.path == "/env":
                    self.answer(200, server.env)
                else:
                    self.answer(404, {"detail": "not found"})

            def do_POST(self):
                server.paths.append(("POST", self.path))
                body = self.rfile.read(int(self.headers["Content-Length"]))
                head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
                for part in email.parser.BytesParser().parsebytes(head + body).get_payload():
                    if part.get_param("name", header="content-disposition") == "blob":
                        server.blobs.append(part.get_payload(decode=True))
                self.answer(200, {"id": "job-1", "status": "RECEIVED"})

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def serve():
    """``serve(env)``: a running ``Server`` answering ``env`` at ``/env``, shut down after the test."""
    started = []

    def start(env: dict) -> Server:
        started.append(Server(env))
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.fixture(scope="module")
def model():
    return StandardizedTransformer(tiny_checkpoint("llama"), attn_implementation="eager")


def run(model, remote, **kwargs):
    """The three values the tests compare, read (and the attention written) in one trace; None where they stay on the server.

    A non-blocking remote trace (``blocking=False``) only sends: its block does not run here, and nothing comes back into
    this frame.
    """
    with torch.no_grad(), model.trace(PROMPTS, remote=remote, **kwargs):
        attention = model.layers[1].self_attn
        probabilities = attention.attention_probabilities.save()
        attention.attention_output = attention.attention_output * 0.5
        layer_output = model.layers[1].layer_output.save()
        logits = model.logits.save()
    if kwargs.get("blocking", True) is False:
        return None
    return {"probabilities": probabilities, "layer_output": layer_output, "logits": logits}


def client_packages(*modules: str) -> dict:
    """A server's ``/env`` packages holding this client's nnsight and ``modules`` at this client's versions, by import name."""
    return {"nnsight": installed("nnsight") or "0.8.1", "torch": torch.__version__, **{m: installed(m) for m in modules}}


def refused(model, server: Server) -> str:
    with pytest.raises(RemoteEnvironmentError) as caught:
        run(model, server.host)  # blocking: the default path, a websocket after serializing
    return str(caught.value)


def test_a_server_without_nnterp_is_refused_before_anything_is_sent(model, serve):
    server = serve({"python_version": SERVER_PYTHON, "packages": {"nnsight": "0.8.1", "torch": "2.15.0"}})
    message = refused(model, server)
    assert server.paths == [("GET", "/env")]  # no /subscribe, no /request
    assert "it has no nnterp-core (import nnterp)" in message and "nnterp-text 0.1.0" not in message.split("server:")[1]
    assert f"client: Python {sys.version.split()[0]}, nnsight {installed('nnsight')}" in message
    assert "server: Python 3.12.1, nnsight 0.8.1, nnterp-core missing" in message
    assert f"nnterp-core=={installed('nnterp')}" in message and "remote=False" in message


def test_a_server_with_pypi_nnterp_1_3_is_refused_with_both_versions(model, serve):
    packages = {**client_packages(), "nnterp": "1.3.2"}
    server = serve({"python_version": SERVER_PYTHON, "packages": packages})
    message = refused(model, server)
    assert server.paths == [("GET", "/env")]
    assert f"its nnterp is 1.3.2, this client's nnterp-core is {installed('nnterp')}" in message
    assert "another library under the same import name" in message
    assert "server: Python 3.12.1, nnsight 0.8.1, nnterp-core 1.3.2" in message


def test_a_server_without_the_family_s_package_is_refused(serve):
    # llama is served by nnterp's own default family; gpt2 by nnterp_text's, whose classes its payload need not name
    gpt2 = StandardizedTransformer(tiny_checkpoint("gpt2"), attn_implementation="eager")
    assert family_packages(gpt2.family) == {"nnterp_text"}
    server = serve({"python_version": SERVER_PYTHON, "packages": client_packages("nnterp")})
    message = refused(gpt2, server)
    assert server.paths == [("GET", "/env")]
    assert "it has no nnterp-text (import nnterp_text)" in message and "its nnterp is" not in message
    assert f"nnterp-text=={installed('nnterp_text')}" in message


def test_a_checkpoint_directory_keys_a_request_by_its_path_without_asking_the_hub(model, monkeypatch):
    # nnsight spells a repo id as the Hub does; a directory has no Hub spelling (HfApi refuses it as a repo id)
    monkeypatch.delitem(huggingface._ID_CACHE, model.repo_id, raising=False)
    monkeypatch.setattr("huggingface_hub.HfApi.model_info", lambda *args, **kwargs: pytest.fail("the Hub was asked"))
    assert json.loads(model._remoteable_model_key())["repo_id"] == model.repo_id == str(tiny_checkpoint("llama"))


def test_a_server_whose_env_cannot_be_read_is_refused(model, serve):
    server = serve({})
    server.close()  # nothing listens on its port now
    with pytest.raises(RemoteEnvironmentError, match=r"could not read http://127\.0\.0\.1:\d+/env"):
        run(model, server.host)


@pytest.mark.parametrize("installed_as", ["wheel", "editable"])
def test_a_matching_server_gets_the_request_with_nnterp_by_reference(model, serve, monkeypatch, installed_as):
    if installed_as == "wheel":  # a wheel maps the import name to its version
        packages = client_packages("nnterp")
    else:  # an editable install maps no import name: the server's /env lists the distribution
        packages = {**client_packages(), distribution("nnterp"): installed("nnterp")}
    server = serve({"python_version": SERVER_PYTHON, "packages": packages})
    inside = []
    serialize = nnsight_request.RequestModel.serialize.__func__

    def watched(cls, tracer, compress=False):
        inside.append({name for name in _PICKLE_BY_VALUE_MODULES if ours(name)})
        return serialize(cls, tracer, compress)

    monkeypatch.setattr(nnsight_request.RequestModel, "serialize", classmethod(watched))
    run(model, server.host, blocking=False)
    run(model, server.host, blocking=False)
    assert server.paths == [("GET", "/env"), ("POST", "/request"), ("POST", "/request")]  # /env once per host
    assert inside == [set(), set()]  # no nnterp module registered for pickling by value while the payload was made
    # what nnsight's pull_env registered of nnterp is back once the payload is made (remote="local" relies on it)
    local = {name for name, where in get_local_env()["packages"].items() if where == "local" and ours(name)}
    assert local <= _PICKLE_BY_VALUE_MODULES
    payload = zstandard.ZstdDecompressor().decompress(server.blobs[0])
    named = globals_named(payload)
    assert ("nnterp.transformer", "StandardizedTransformer") in named
    assert needed(payload) == {"nnterp"} == family_packages(model.family)  # llama's family is nnterp's default
    # nothing was pickled by value: no class skeleton, no function rebuilt from source or from bytecode
    made = {qualname for _, qualname in named}
    assert not made & {"_make_skeleton_class", "_make_skeleton_enum", "_make_function", "_load_function"}, made
    assert b"CodeType" not in payload  # cloudpickle names the type it rebuilds bytecode with


def test_remote_local_and_remote_hosts_get_the_backends_they_did(model):
    assert type(model._remote_backend("local", True, None, False)) is LocalSimulationBackend
    assert isinstance(model._remote_backend("http://127.0.0.1:9", True, None, False), Checked)


#: an NDIF model actor's part, on the other Python: rebuild the tracer against its own model, run it, keep the saves
ACTOR = """
import sys
import torch
from nnterp import StandardizedTransformer
from nnsight.schema.request import RequestModel
from nnsight.tracing.tracer import _saves, dec, inc

checkpoint, blob, out = sys.argv[1:]
model = StandardizedTransformer(checkpoint, attn_implementation="eager")
model.dispatch()
tracer = RequestModel.deserialize(open(blob, "rb").read(), model._remoteable_persistent_objects(), compress=True)
inc()
try:
    with torch.no_grad():
        tracer.execute(tracer.info.code)
    saves = _saves()
    saved = {name: value for name, value in tracer.info.frame.f_locals.items() if id(value) in saves}
finally:
    dec()
torch.save({name: value.detach().clone() for name, value in saved.items()}, out)
"""


def python312() -> str:
    """The 3.12 interpreter with nnterp installed: ``NNTERP_PY312``, else the venv ``scripts/ndif_stack.py build`` makes."""
    chosen = os.environ.get("NNTERP_PY312") or str(REPO / ".ndif" / "server" / "bin" / "python")
    if Path(chosen).is_file() and os.access(chosen, os.X_OK):
        return chosen
    why = (
        f"no Python 3.12 with nnterp at {chosen}: run `uv run --no-sync python scripts/ndif_stack.py build` "
        "(or set NNTERP_PY312 to such an interpreter)"
    )
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def test_a_payload_from_this_python_runs_on_3_12_as_the_local_trace(model, serve, tmp_path):
    other = python312()
    version = subprocess.run([other, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    assert version.stdout.strip() != str(sys.version_info[:2]), f"{other} is this Python: no cross-version round trip"
    server = serve({"python_version": SERVER_PYTHON, "packages": client_packages("nnterp")})
    # a trace first: it leaves the model's last call on it (nnterp._writes.Call), which by value crashed a 3.12 server
    local = run(model, False)
    run(model, server.host, blocking=False)
    (tmp_path / "request").write_bytes(server.blobs[0])
    done = subprocess.run(
        [other, "-c", ACTOR, tiny_checkpoint("llama"), str(tmp_path / "request"), str(tmp_path / "saved.pt")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    remote = torch.load(tmp_path / "saved.pt")
    assert remote.keys() == local.keys()
    assert all(torch.equal(remote[name], local[name]) for name in local), {n: (remote[n] - local[n]).abs().max() for n in local}
