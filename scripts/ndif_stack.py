"""A real NDIF server on 127.0.0.1 for nnterp's remote tests: build its environment, start it, stop it.

    uv run python scripts/ndif_stack.py build [--plain]  # .ndif/server (Python 3.12, ndif, nnterp), or .ndif/plain (no nnterp)
    uv run python scripts/ndif_stack.py start [--plain]  # redis, Ray (one declared GPU), the controller, the API, the store
    uv run python scripts/ndif_stack.py stop [--plain]   # every process it started, by process id
    uv run python scripts/ndif_stack.py status

The stack is NDIF's own (the ``ndif`` package from PyPI, its API under gunicorn, its controller on Ray), configured
through its ``NDIF_*`` settings; the CPU adaptations are two small classes in ``scripts/ndif/nnterp_ndif_cpu.py``,
named through NDIF's import-path settings. The server runs float32 (NDIF's default is bfloat16) so its values can
equal a local run's. ``start`` writes ``.ndif/<name>/stack.json`` (the API's URL, the process ids, the logs); the
tests read it. ``--plain`` starts a second stack, from an environment without nnterp, on other ports.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import version
from pathlib import Path

import side_envs

ROOT = Path(__file__).resolve().parents[1]
HOME = Path(os.environ.get("NNTERP_NDIF_HOME", ROOT / ".ndif"))
MEMBERS = ["nnterp-core", "nnterp-text", "nnterp-recurrent", "nnterp-vision", "nnterp-conformance"]
#: the packages whose versions the server takes from this workspace, so that both sides compute the same thing
PINNED = ["torch", "transformers", "nnsight", "huggingface-hub", "tokenizers", "safetensors", "accelerate", "numpy", "cloudpickle"]
NDIF = "ndif[api,ray]==0.1.2"
#: ports of each stack: redis, Ray's head (GCS), Ray's client server, Ray's dashboard, the API, the object store
PORTS = {
    "server": {"redis": 6390, "ray": 6386, "ray_client": 9801, "dashboard": 8275, "api": 8011, "store": 9011, "objects": 8086, "agent": 52376, "agent_http": 52386, "metrics": 8091},
    "plain": {"redis": 6391, "ray": 6387, "ray_client": 9802, "dashboard": 8276, "api": 8012, "store": 9012, "objects": 8087, "agent": 52377, "agent_http": 52387, "metrics": 8092},
}
#: torch's threads in each process of the stack: a client comparing values bit for bit runs the same count
THREADS = 1
#: how much GPU memory the CPU node declares: the controller sizes placements against it (each tiny model asks ~0.5 GB)
DECLARED_GPU_BYTES = 16 * 1024**3


def venv(name: str) -> Path:
    return HOME / name


def python(name: str) -> Path:
    return venv(name) / "bin" / "python"


def build(names: list[str]) -> None:
    """Python 3.12 environments with ndif; ``server`` has nnterp's members installed (not editable), ``plain`` has not."""
    pins = [f"{package}=={version(package)}" for package in PINNED]
    interpreter = side_envs.interpreter(12, "ndif takes 3.12 or 3.13", "ndif_stack.py")
    for name in names:
        started = time.time()
        subprocess.run([side_envs.uv("ndif_stack.py"), "venv", "-q", "--allow-existing", "-p", interpreter, str(venv(name))], check=True)
        packages = [NDIF, "moto[server]", *pins]
        if name == "server":
            packages += [str(ROOT / "packages" / member) for member in MEMBERS]
        reinstall = [flag for member in MEMBERS for flag in ("--reinstall-package", member)] if name == "server" else []
        subprocess.run([side_envs.uv("ndif_stack.py"), "pip", "install", "-q", "--compile-bytecode", "--no-sources", "--python", str(python(name)), *reinstall, *packages], check=True)
        print(f"ndif_stack.py: built {venv(name)} in {time.time() - started:.0f} s")


def state_file(name: str) -> Path:
    return venv(name) / "stack.json"


def environment(name: str) -> dict[str, str]:
    """The ``NDIF_*`` settings every process of the stack shares."""
    ports = PORTS[name]
    bin_dir = str(venv(name) / "bin")
    # a stack started from `uv run` must not look like one: Ray would start its workers with `uv run` of this workspace
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("UV_", "VIRTUAL_ENV", "PYTHONHOME"))}
    return {
        **inherited,
        "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv(name)),
        "PYTHONPATH": str(ROOT / "scripts" / "ndif"),
        "HF_HUB_OFFLINE": "1",
        "NDIF_HOME": str(venv(name) / "home"),
        "NDIF_REDIS_URL": f"redis://127.0.0.1:{ports['redis']}",
        "NDIF_RAY_ADDRESS": f"ray://127.0.0.1:{ports['ray_client']}",
        "NDIF_API_URL": f"http://127.0.0.1:{ports['api']}",
        "NDIF_API_PORT": str(ports["api"]),
        "NDIF_OBJECT_STORE_URL": f"http://127.0.0.1:{ports['store']}",
        "NDIF_OBJECT_STORE_ACCESS_KEY": "nnterp",
        "NDIF_OBJECT_STORE_SECRET_KEY": "nnterp",
        "NDIF_MODEL_IMPORT_PATH": "nnterp_ndif_cpu.CPUModelActor",
        "NDIF_CONTROLLER_IMPORT_PATH": "nnterp_ndif_cpu.Controller",
        "NDIF_DEFAULT_DTYPE": "float32",
        "NDIF_DEFAULT_PADDING_BIAS": str(64 * 1024**2),
        "NDIF_CONTROLLER_SYNC_INTERVAL_S": "2",
        "RAY_ADDRESS": f"127.0.0.1:{ports['ray']}",
        "GRPC_ENABLE_FORK_SUPPORT": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_DEDUP_LOGS": "0",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(THREADS),
    }


def spawn(command: list[str], env: dict[str, str], log: Path) -> int:
    with open(log, "ab") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return process.pid


def wait_for(what: str, ready, timeout: float, logs: Path, name: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(1)
    stop(name)
    sys.exit(f"ndif_stack.py: {what} did not answer within {timeout:.0f} s; see the logs in {logs}")


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def start(name: str, timeout: float) -> None:
    if not python(name).exists():
        sys.exit(f"ndif_stack.py: {venv(name)} is missing; run `uv run python scripts/ndif_stack.py build` first")
    if state_file(name).exists():
        stop(name)
    started = time.time()
    ports, env = PORTS[name], environment(name)
    logs = venv(name) / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    Path(env["NDIF_HOME"]).mkdir(exist_ok=True)
    pids: dict[str, int] = {}
    state = {"api": env["NDIF_API_URL"], "python": str(python(name)), "pids": pids, "logs": str(logs), "ray_temp": str(HOME / f"ray-{name}"), "threads": THREADS}

    def save() -> None:
        state_file(name).write_text(json.dumps(state, indent=1))

    redis = shutil.which("redis-server")
    if redis is None:
        sys.exit("ndif_stack.py: redis-server is missing; install Debian's redis-server (apt-get install redis-server)")
    pids["redis"] = spawn([redis, "--bind", "127.0.0.1", "--port", str(ports["redis"]), "--save", "", "--appendonly", "no"], env, logs / "redis.log")
    pids["store"] = spawn([str(venv(name) / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(ports["store"])], env, logs / "store.log")
    save()
    wait_for("redis", lambda: listening(ports["redis"]), 30, logs, name)

    # Ray's head: one declared GPU and its memory, so the controller (which places models on GPU nodes) places the CPU actor
    resources = {"head": 10, "cuda_memory_bytes": DECLARED_GPU_BYTES, "cpu_memory_bytes": 8 * 1024**3}
    ray_temp = Path(state["ray_temp"])
    ray_temp.mkdir(exist_ok=True)
    head = subprocess.Popen(
        [
            str(venv(name) / "bin" / "ray"), "start", "--head", "--node-ip-address", "127.0.0.1",
            "--port", str(ports["ray"]), "--ray-client-server-port", str(ports["ray_client"]),
            "--num-cpus", "8", "--num-gpus", "1", "--resources", json.dumps(resources),
            "--object-manager-port", str(ports["objects"]), "--dashboard-agent-grpc-port", str(ports["agent"]), "--dashboard-agent-listen-port", str(ports["agent_http"]),
            "--metrics-export-port", str(ports["metrics"]),
            # the controller reads the nodes through the dashboard's state API: without it it stops at once
            "--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(ports["dashboard"]),
            "--temp-dir", str(ray_temp), "--disable-usage-stats",
        ],
        env=env, stdout=open(logs / "ray-start.log", "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        # a session of its own: every process `ray start` daemonizes keeps its group, which `stop` ends by id
        start_new_session=True,
    )
    pids["ray"] = head.pid
    save()
    if head.wait(timeout=300) != 0:
        stop(name)
        sys.exit(f"ndif_stack.py: `ray start` failed; see {logs / 'ray-start.log'}")

    launched = subprocess.run([str(python(name)), "-m", "ndif.services.ray.deployments.controller.controller"], env=env, capture_output=True, text=True, timeout=300)
    (logs / "controller-launch.log").write_text(launched.stdout + launched.stderr)
    if launched.returncode != 0:
        stop(name)
        sys.exit(f"ndif_stack.py: launching the controller failed; see {logs / 'controller-launch.log'}")

    pids["api"] = spawn(
        [str(venv(name) / "bin" / "gunicorn"), "--config", "python:ndif.services.api.gunicorn_conf", "--bind", f"127.0.0.1:{ports['api']}", "ndif.services.api.app:app"],
        env, logs / "api.log",
    )
    save()
    api = env["NDIF_API_URL"]
    wait_for("the API", lambda: get(f"{api}/ping") is not None, timeout, logs, name)
    # /env answers once the API's dispatcher reaches Ray and the controller: the stack is whole
    wait_for("the controller (GET /env)", lambda: b"packages" in get(f"{api}/env", timeout=60), timeout, logs, name)
    state["started_in_s"] = round(time.time() - started, 1)
    save()
    print(f"ndif_stack.py: {name} stack answering at {api} after {state['started_in_s']} s")


def stop(name: str) -> None:
    path = state_file(name)
    if not path.exists():
        print(f"ndif_stack.py: no {name} stack is recorded")
        return
    state = json.loads(path.read_text())
    # each service's process group and every process descending from it (Ray's workers start sessions of their own)
    doomed = processes_of([pid for pid in state["pids"].values()])
    for pid in state["pids"].values():
        end_group(pid)
    for pid in doomed:
        end_process(pid)
    path.unlink()
    print(f"ndif_stack.py: {name} stack stopped")


def processes_of(groups: list[int]) -> list[int]:
    """The ids of the processes in these process groups and of all their descendants, read off /proc."""
    parents: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = (int(fields[1]), int(fields[2]))  # parent id, group id
    found = {pid for pid, (_, group) in parents.items() if group in groups}
    grew = True
    while grew:
        children = {pid for pid, (parent, _) in parents.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return sorted(found)


def end_group(group: int) -> None:
    """A process group the stack started in a session of its own: SIGTERM, then SIGKILL after 10 s."""
    _end(lambda sig: os.killpg(group, sig))


def end_process(pid: int) -> None:
    _end(lambda sig: os.kill(pid, sig))


def _end(send) -> None:
    try:
        send(signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            send(0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.2)
    try:
        send(signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["build", "start", "stop", "status"])
    parser.add_argument("--plain", action="store_true", help="the stack whose environment has no nnterp")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for the stack to answer")
    arguments = parser.parse_args()
    name = "plain" if arguments.plain else "server"
    if arguments.command == "build":
        build([name])
    elif arguments.command == "start":
        start(name, arguments.timeout)
    elif arguments.command == "stop":
        stop(name)
    else:
        for each in PORTS:
            print(each, state_file(each).read_text() if state_file(each).exists() else "not running")


if __name__ == "__main__":
    main()
