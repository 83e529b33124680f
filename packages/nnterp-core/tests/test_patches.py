"""nnterp's patches of other libraries: none by importing a package; each undone exactly, on an exception too; each still doing its work."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap

import nnterp  # noqa: F401 - nnsight before transformers.models
import pytest
import torch

from nnterp import _patches
from nnterp._patches import MISSING, Patch, hold, owner_of, release
from nnterp._patches.nnsight import ALIASING, BACKWARD_GRAD_FOR_BLOCKS, CACHE_KEYWORD, ENVOY_CLASSES
from nnterp._patches.transformers import PARAMETER_PLAN

CORE = (CACHE_KEYWORD, BACKWARD_GRAD_FOR_BLOCKS, ALIASING, PARAMETER_PLAN)


def _held(patch: Patch) -> list:
    """What each of ``patch``'s targets holds now (``MISSING`` where its owner has none of its own)."""
    found = []
    for target in patch.targets:
        owner, name = owner_of(target)
        found.append(vars(owner).get(name, MISSING))
    return found


# -- nothing patched by importing ----------------------------------------------------------------------------------

#: fingerprints the module namespaces (and a class's) named on its command line: each attribute's identity, and for a
#: function or a module's ``forward``, what each closure cell holds (a transformers kernel dispatcher's
#: ``implementation``, a ``kernels`` function module's ``func``); then imports every nnterp package and every
#: registered family, and prints which changed
SCRIPT = textwrap.dedent(
    """
    import importlib, json, sys
    import nnsight  # nnsight before transformers.models
    import torch

    def owner(spec):
        module, _, name = spec.partition(":")
        found = importlib.import_module(module)
        return getattr(found, name) if name else found

    def cells(value):
        value = getattr(type(value), "forward", value) if isinstance(value, torch.nn.Module) else value
        return [id(cell.cell_contents) for cell in getattr(value, "__closure__", None) or () if _full(cell)]

    def _full(cell):
        try:
            cell.cell_contents
        except ValueError:
            return False
        return True

    def fingerprint(spec):
        return {name: [id(value), cells(value)] for name, value in list(vars(owner(spec)).items())}

    specs = sys.argv[1:]
    before = {spec: fingerprint(spec) for spec in specs}
    import nnterp, nnterp_text, nnterp_recurrent, nnterp_vision, nnterp_conformance
    from nnterp import registry
    for name in registry.catalog().modules:
        registry.family_named(name)
    changed = {}
    for spec in specs:
        after = fingerprint(spec)
        names = set(before[spec]) | set(after)
        changed[spec] = sorted(name for name in names if before[spec].get(name) != after.get(name))
    print("RESULT" + json.dumps(changed))
    """
)

#: what nnterp patches (or patched at import before), besides the recurrent families' modeling modules
PATCHED = (
    "nnsight.modeling.processing",
    "nnsight.intervention.backward",
    "nnsight.intervention.aliasing",
    "nnsight.intervention.envoy:Envoy",
    "transformers.distributed.tensor_parallel",
    "transformers.models.llama4.modeling_llama4",
    "torch:Tensor",
)


def _recurrent_modeling() -> list[str]:
    from nnterp import registry
    from nnterp_recurrent.family import RecurrentFamily

    found = set()
    for name in registry.catalog().modules:
        family = registry.family_named(name)
        if isinstance(family, RecurrentFamily):
            found.update(family.modeling)
    return sorted(found)


def test_importing_every_package_and_family_patches_nothing():
    modeling = _recurrent_modeling()
    assert modeling, "no recurrent family names its modeling modules"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *PATCHED, *modeling], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    changed = json.loads(done.stdout.split("RESULT", 1)[1])
    assert set(changed) == set(PATCHED) | set(modeling)
    assert not any(changed.values()), {spec: names for spec, names in changed.items() if names}


# -- each patch undone exactly -------------------------------------------------------------------------------------


@pytest.mark.parametrize("patch", CORE, ids=lambda patch: patch.__name__)
def test_a_patch_is_undone_on_exit_and_on_an_exception(patch):
    before = _held(patch)
    with patch:
        during = _held(patch)
        assert any(now is not then for now, then in zip(during, before)), "the patch replaced nothing"
    assert all(now is then for now, then in zip(_held(patch), before))
    with pytest.raises(KeyError), patch:
        raise KeyError("inside")
    assert all(now is then for now, then in zip(_held(patch), before))
    assert not patch.installed and not patch.saved


def test_the_parameter_plan_is_added_where_absent_and_deleted_again():
    import transformers.distributed.tensor_parallel as tensor_parallel
    from transformers.distributed.parallel_utils import _get_parameter_plan

    assert "_get_parameter_plan" not in vars(tensor_parallel), "this transformers has it there: delete PARAMETER_PLAN"
    with PARAMETER_PLAN:
        assert tensor_parallel._get_parameter_plan is _get_parameter_plan
    assert "_get_parameter_plan" not in vars(tensor_parallel)


def test_nested_installs_share_one_and_the_last_uninstall_restores():
    before = _held(CACHE_KEYWORD)
    with CACHE_KEYWORD:
        first = _held(CACHE_KEYWORD)
        with CACHE_KEYWORD:
            assert all(now is then for now, then in zip(_held(CACHE_KEYWORD), first))
        assert all(now is then for now, then in zip(_held(CACHE_KEYWORD), first))
    assert all(now is then for now, then in zip(_held(CACHE_KEYWORD), before))
    with pytest.raises(RuntimeError, match="not installed"):
        CACHE_KEYWORD.uninstall()


def test_an_install_that_fails_half_way_puts_back_what_it_replaced():
    import nnsight.intervention.aliasing as aliasing

    spellings, named = aliasing.spellings, aliasing.named

    def replace(first, second):
        return (lambda *args: None, second, None)  # three replacements for two targets: zip stops, nothing else raises

    def broken(first, second):
        yield lambda *args: None
        raise ValueError("the second replacement cannot be made")

    failing = Patch(("nnsight.intervention.aliasing:spellings", "nnsight.intervention.aliasing:named"), broken)
    with pytest.raises(ValueError, match="second replacement"):
        failing.install()
    assert aliasing.spellings is spellings and aliasing.named is named
    assert not failing.installed and not failing.saved
    unchanged = Patch(("nnsight.intervention.aliasing:spellings", "nnsight.intervention.aliasing:named"), replace)
    with unchanged:
        assert aliasing.spellings is not spellings and aliasing.named is named
    assert aliasing.spellings is spellings


def test_a_held_patch_lasts_the_holders_life_and_release_ends_it():
    class Holder:
        pass

    before = _held(BACKWARD_GRAD_FOR_BLOCKS)
    holder = Holder()
    hold(holder, BACKWARD_GRAD_FOR_BLOCKS)
    hold(holder, BACKWARD_GRAD_FOR_BLOCKS)  # held once however often it is asked
    assert BACKWARD_GRAD_FOR_BLOCKS.count == 1
    del holder
    gc.collect()
    assert not BACKWARD_GRAD_FOR_BLOCKS.installed
    assert all(now is then for now, then in zip(_held(BACKWARD_GRAD_FOR_BLOCKS), before))
    other = Holder()
    hold(other, BACKWARD_GRAD_FOR_BLOCKS, PARAMETER_PLAN)
    assert BACKWARD_GRAD_FOR_BLOCKS.installed and PARAMETER_PLAN.installed
    release(other)
    assert not BACKWARD_GRAD_FOR_BLOCKS.installed and not PARAMETER_PLAN.installed
    assert all(now is then for now, then in zip(_held(BACKWARD_GRAD_FOR_BLOCKS), before))
    release(other)  # a second release does nothing


def test_a_sharded_load_holds_the_tensor_parallel_patches_for_the_models_life():
    from nnterp import _tensor_parallel

    class Model:
        pass

    model = Model()
    _tensor_parallel.bridge(model)
    assert BACKWARD_GRAD_FOR_BLOCKS.installed and PARAMETER_PLAN.installed
    assert _patches.HELD in vars(model)
    release(model)
    assert not BACKWARD_GRAD_FOR_BLOCKS.installed and not PARAMETER_PLAN.installed


# -- each patch still does its work --------------------------------------------------------------------------------


def test_a_cache_passed_as_cache_gets_no_mask_over_the_new_tokens_alone():
    import nnsight.modeling.processing as processing
    from transformers import DynamicCache

    encoding = {"input_ids": torch.tensor([[5, 6, 7]]), "cache": DynamicCache()}
    rows, _ = processing.encode_pretokenized(encoding)
    assert "attention_mask" in rows[0]  # nnsight alone: a mask over the three new tokens, hiding the cached ones
    with CACHE_KEYWORD:
        rows, forward = processing.encode_pretokenized(encoding)
    assert "attention_mask" not in rows[0] and forward["cache"] is encoding["cache"] and "past_key_values" not in forward


def test_a_trace_continuing_a_cache_given_as_cache_reads_as_the_whole_prompt(tiny_model):
    import nnsight.modeling.processing as processing
    from transformers import DynamicCache

    model = tiny_model("llama")
    ids = model.tokenizer("The Eiffel Tower is in Paris", return_tensors="pt")["input_ids"]
    encode = processing.encode_pretokenized
    with torch.no_grad(), model.trace(ids):
        whole = model.logits.save()
    cache = DynamicCache(config=model._module.config)
    with torch.no_grad(), model.trace(ids[:, :3], cache=cache):
        pass
    with torch.no_grad(), model.trace(ids[:, 3:], cache=cache):
        continued = model.logits.save()
    assert processing.encode_pretokenized is encode  # installed for the call's batching alone
    torch.testing.assert_close(continued, whole[:, 3:])


def test_construction_resolves_the_same_tree_and_leaves_nnsights_aliasing_as_it_was(tiny_model):
    import nnsight.intervention.aliasing as aliasing
    from nnsight import Envoy
    from nnterp import StandardizedTransformer
    from nnterp_conformance import tiny_checkpoint

    before = (aliasing.spellings, aliasing.named, aliasing.path_ends_with, vars(Envoy)["_resolve_envoy_class"])
    ENVOY_CLASSES.clear()
    first = StandardizedTransformer(tiny_checkpoint("llama"))
    assert ENVOY_CLASSES, "the construction resolved no envoy class through the patch"
    second = StandardizedTransformer(tiny_checkpoint("llama"))  # from the kept resolutions
    after = (aliasing.spellings, aliasing.named, aliasing.path_ends_with, vars(Envoy)["_resolve_envoy_class"])
    assert all(now is then for now, then in zip(after, before))

    def tree(envoy):
        return [(envoy.path, type(envoy))] + [row for child in envoy._children for row in tree(child)]

    assert tree(first) == tree(second)


def test_a_patch_pickles_as_its_name_and_comes_back_the_same():
    # a function shipped by value (remote="local") that names a patch carries its name, not its lock and saved originals
    import pickle

    from nnterp._patches.nnsight import CACHE_KEYWORD

    with CACHE_KEYWORD:
        assert pickle.loads(pickle.dumps(CACHE_KEYWORD)) is CACHE_KEYWORD
