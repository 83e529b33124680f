"""nnterp-recurrent's patches of transformers' modeling modules: each undone exactly, its record forgotten, on an exception too."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import nnterp  # noqa: F401 - nnsight before transformers.models
import pytest
import torch

from nnterp_recurrent import _patches, route_kernels


def _dispatching_module() -> ModuleType:
    """A modeling module whose ``kernel`` is a transformers-style dispatcher calling its ``implementation`` cell."""

    def fast(x: Any) -> Any:
        return x

    implementation = fast

    def kernel(x: Any) -> Any:
        return implementation(x)

    module = ModuleType("modeling_probe")
    module.kernel, module.fast = kernel, fast
    return module


def test_bind_then_unbind_puts_back_what_the_dispatcher_called_and_forgets_it():
    module = _dispatching_module()

    def slow(x: Any) -> Any:
        return -x

    _patches.bind(module, {"kernel": slow})
    assert _patches.calls(module, "kernel") is slow and module.kernel(2) == -2
    assert _patches.original(module, "kernel") is module.fast
    _patches.bind(module, {"kernel": slow})  # bound twice, the first record stands
    _patches.unbind(module, ["kernel"])
    assert _patches.calls(module, "kernel") is module.fast and module.kernel(2) == 2
    assert ("modeling_probe", "kernel") not in _patches.ORIGINALS


def test_routing_a_familys_kernels_and_back_leaves_each_dispatcher_as_it_was():
    from nnterp.registry import family_named
    from nnterp_recurrent.routing import mixer_classes, modeling_modules

    family = family_named("qwen3_next")
    (module,) = modeling_modules(family)
    names = [name for cls in mixer_classes(family) for name in cls.kernel_names()]
    before = {name: _patches.calls(module, name) for name in names}
    route_kernels(family, "torch")
    assert any(_patches.calls(module, name) is not found for name, found in before.items())
    route_kernels(family, "default")
    assert all(_patches.calls(module, name) is found for name, found in before.items())
    assert not [key for key in _patches.ORIGINALS if key[0] == module.__name__]


def test_keeping_states_routes_back_on_an_exception(tiny_model):
    model = tiny_model("qwen3_next")
    mixer = next(layer.linear_attn for layer in model.layers if "linear_attn" in layer.__dict__)
    module = sys.modules[type(mixer._module).__module__]
    before = {name: _patches.calls(module, name) for name in mixer.kernel_names()}
    with pytest.raises(KeyError), mixer.keeping_states():
        assert mixer.routing() == "torch"
        raise KeyError("inside")
    assert all(_patches.calls(module, name) is found for name, found in before.items())


def test_see_through_then_restore_forgets_its_record():
    def kernel(x: Any) -> Any:
        return x

    func = kernel

    def forward(self: Any, *args: Any) -> Any:
        return func(*args)

    wrapped = type("Func", (torch.nn.Module,), {"forward": forward})()
    module = ModuleType("modeling_probe_hub")
    module.kernel = wrapped
    others = dict(_patches.SEEN_THROUGH)  # the real modeling modules' (a model built earlier in this process)
    assert _patches.see_through(module) == ["kernel"] and module.kernel is kernel
    _patches.restore(module)  # this module's names alone: the others' models go on drilling into their kernels
    assert module.kernel is wrapped and _patches.SEEN_THROUGH == others
