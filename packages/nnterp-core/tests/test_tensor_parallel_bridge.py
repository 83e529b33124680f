"""The bridge between nnsight 0.8.1's tensor parallelism and the pinned transformers, without ranks (the sharded runs are the kit's test_tensor_parallel)."""

import nnterp  # noqa: F401 - nnsight before transformers.models
import torch

from nnterp import _tensor_parallel
from nnterp._patches import release


class _Model:
    """A stand-in for the sharded model the bridge is held for."""


def test_bridge_puts_the_plan_matcher_where_nnsight_imports_it():
    model = _Model()
    _tensor_parallel.bridge(model)
    try:
        from transformers.distributed.tensor_parallel import _get_parameter_plan

        plan = {"model.layers.*.self_attn.q_proj": "colwise"}
        assert _get_parameter_plan("model.layers.3.self_attn.q_proj", plan, is_weight=False) == "colwise"
    finally:
        release(model)


def test_bridge_is_held_once_per_model():
    import nnsight.intervention.backward as backward

    model = _Model()
    _tensor_parallel.bridge(model)
    first = backward._grad_property
    _tensor_parallel.bridge(model)
    assert backward._grad_property is first
    release(model)
    assert backward._grad_property is not first


def test_a_tp_plan_load_counts_as_sharded():
    assert _tensor_parallel.wanted("some/repo", {"tp_plan": "auto"})
    assert not _tensor_parallel.wanted("some/repo", {})


def test_backward_grad_outside_the_block_reads_torchs_attribute():
    # code outside the block's own mediators (transformers' gradient hooks) reads torch's .grad
    import nnsight.intervention.backward as backward

    class Session:
        mediators: list = []

    model = _Model()
    _tensor_parallel.bridge(model)
    try:
        served = backward._grad_property(Session(), set(), [])
    finally:
        release(model)
    weight = torch.nn.Parameter(torch.ones(2))
    weight.grad = torch.full((2,), 3.0)
    assert torch.equal(served.fget(weight), torch.full((2,), 3.0))
