"""The recurrent families with the ``kernels`` library installed: its function modules seen through, every check holding.

With ``kernels`` importable, transformers makes each kernel function of a
modeling module a ``Func`` module, which nnsight cannot drill into and whose
dispatcher ``route_kernels`` could not find (``TypeError: Func() is not a
transformers kernel dispatcher``). The install test puts the release the
locked transformers accepts into a folder of its own (PyPI, as the upgrade
radar's scratch environments do) and runs the kit in a process that imports it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from types import ModuleType
from typing import Any

import pytest
import torch

#: the newest ``kernels`` the locked transformers accepts (its KERNELS_MIN_VERSION <= version < KERNELS_MAX_VERSION),
#: and what it needs that the workspace does not hold
KERNELS = ("kernels==0.18.3", "tomlkit>=0.13.3")
#: one checkpoint per kind of recurrent kernel: gated DeltaNet, Mamba-1's scan, Mamba-2's SSD, Kimi's delta attention,
#: a hybrid with Mamba-2 heads beside attention
CHECKPOINTS = ("qwen3_next", "mamba", "mamba2", "kimi_linear", "falcon_h1")

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import nnterp
    from transformers.integrations import hub_kernels as transformers_hub
    from nnterp_conformance.runner import load, run
    from nnterp_recurrent import hub_kernels

    assert transformers_hub.is_kernels_available(), "kernels did not import in the test's process"
    found = {}
    for name in sys.argv[1:]:
        model = load(name)
        verdicts = run(model)
        found[name] = {
            "seen_through": sorted(key[1] for key in hub_kernels.SEEN_THROUGH),
            "failed": [str(verdict) for verdict in verdicts if verdict.status == "fail"],
            "passed": sum(verdict.status == "pass" for verdict in verdicts),
        }
    print("RESULT" + json.dumps(found))
    """
)


@pytest.fixture(scope="module")
def kernels_folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.fail("this test installs kernels with uv, which is not on the PATH")
    folder = tmp_path_factory.mktemp("kernels")
    installed = subprocess.run([uv, "pip", "install", "-q", "--no-deps", "--target", str(folder), *KERNELS], capture_output=True, text=True)
    if installed.returncode:
        pytest.fail(f"could not install {' '.join(KERNELS)} from the package index: {installed.stderr.strip()}")
    return str(folder)


def test_recurrent_families_hold_with_kernels_installed(kernels_folder: str) -> None:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [kernels_folder, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *CHECKPOINTS], capture_output=True, text=True, env=environment, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.split("RESULT", 1)[1])
    for name in CHECKPOINTS:
        assert not found[name]["failed"], f"{name} with kernels installed:\n" + "\n".join(found[name]["failed"])
        assert found[name]["seen_through"], f"{name}: no kernels function module was seen through: kernels did not wrap the kernels"
        assert found[name]["passed"] > 20, found[name]


class _Func(torch.nn.Module):
    """The shape of ``kernels``' function module: its ``forward`` closes over ``func``, the function it stands for."""


def _function_module(function: Any) -> torch.nn.Module:
    func = function

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return type("Func", (_Func,), {"forward": forward})()


def test_see_through_rebinds_a_function_module_and_restore_undoes_it() -> None:
    from nnterp_recurrent import hub_kernels

    def kernel(x: Any) -> Any:
        return x

    module = ModuleType("modeling_probe")
    wrapped = _function_module(kernel)
    module.kernel, module.other = wrapped, 3
    assert hub_kernels.see_through(module) == ["kernel"]
    assert module.kernel is kernel and module.other == 3
    hub_kernels.restore()
    assert module.kernel is wrapped


def test_a_layer_given_a_hub_kernel_is_named() -> None:
    from nnterp_recurrent import hub_kernels

    layer = torch.nn.Linear(2, 2)
    private = _function_module(lambda x: x)
    layer.__dict__["_kernel_funcs"] = {"torch_chunk_gated_delta_rule": private}
    assert hub_kernels.hub_kernel_in(layer) is None
    private.forward = lambda *args: None  # what kernelize does when it picks a hub kernel
    assert hub_kernels.hub_kernel_in(layer) == "torch_chunk_gated_delta_rule"
    with pytest.raises(hub_kernels.HubKernelInUse, match="use_kernels=False"):
        hub_kernels.seen_through(layer)
