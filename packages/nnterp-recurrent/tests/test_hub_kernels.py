"""The recurrent families with and without the ``kernels`` library: its function modules seen through, every check holding.

With ``kernels`` importable (transformers 5.25 requires it), transformers
makes each kernel function of a modeling module a ``Func`` module, which
nnsight cannot drill into and whose dispatcher ``route_kernels`` could not
find (``TypeError: Func() is not a transformers kernel dispatcher``). The
kit runs on one checkpoint per kind of recurrent kernel in a process of its
own, once with ``kernels`` as the lock installs it and once without it
(hidden from the import system: transformers then keeps plain functions).
Without the package, transformers 5.25 loads a model only with
``USE_HUB_KERNELS=0`` (else ``from_pretrained`` raises "Kernels are not
available"), so that is the setup without it; with the package, 5.25 wraps
every kernel function whatever ``USE_HUB_KERNELS`` says.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from types import ModuleType
from typing import Any

import pytest
import torch

#: one checkpoint per kind of recurrent kernel: gated DeltaNet, Mamba-1's scan, Mamba-2's SSD, Kimi's delta attention,
#: a hybrid with Mamba-2 heads beside attention, LFM2's short convolution
CHECKPOINTS = ("qwen3_next", "mamba", "mamba2", "kimi_linear", "falcon_h1", "lfm2")

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    if sys.argv[1] == "absent":
        sys.modules["kernels"] = None  # importlib finds no such package: transformers keeps each kernel function as it is
        os.environ["USE_HUB_KERNELS"] = "0"  # without which 5.25's from_pretrained refuses to load
    import nnterp
    from transformers.integrations import hub_kernels as transformers_hub
    from nnterp_conformance.runner import load, run
    from nnterp_recurrent import hub_kernels

    found = {"kernels": transformers_hub.is_kernels_available() and transformers_hub._kernels_enabled()}
    for name in sys.argv[2:]:
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


#: the checkpoints each setup runs: the whole suite already runs every family with kernels as the lock installs it,
#: so that setup needs one here, to show the see-through happened
RUNS = {"installed": CHECKPOINTS[1:2], "absent": CHECKPOINTS}


@pytest.mark.parametrize("kernels", list(RUNS))
def test_recurrent_families_hold_with_and_without_kernels(kernels: str) -> None:
    checkpoints = RUNS[kernels]
    done = subprocess.run([sys.executable, "-c", SCRIPT, kernels, *checkpoints], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.split("RESULT", 1)[1])
    assert found["kernels"] == (kernels == "installed"), f"transformers had hub kernels enabled: {found['kernels']}"
    for name in checkpoints:
        assert not found[name]["failed"], f"{name} with kernels {kernels}:\n" + "\n".join(found[name]["failed"])
        # with kernels, each kernel function was a Func module, bound back to the function it calls; without, none was
        assert bool(found[name]["seen_through"]) == (kernels == "installed"), found[name]["seen_through"]
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
    hub_kernels.restore(module)  # this module's alone: a model built earlier in this process goes on drilling into its kernels
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
