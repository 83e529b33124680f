"""The bridge between nnsight 0.8.1's tensor parallelism and the pinned transformers, without ranks (the sharded runs are the kit's test_tensor_parallel)."""

import nnterp  # noqa: F401 - nnsight before transformers.models
import torch

from nnterp import _tensor_parallel


def test_bridge_puts_the_plan_matcher_where_nnsight_imports_it():
    _tensor_parallel.bridge()
    from transformers.distributed.tensor_parallel import _get_parameter_plan

    assert _get_parameter_plan("model.layers.3.self_attn.q_proj", {"model.layers.*.self_attn.q_proj": "colwise"}, is_weight=False) == "colwise"


def test_bridge_is_applied_once():
    import nnsight.intervention.backward as backward

    _tensor_parallel.bridge()
    first = backward._grad_property
    _tensor_parallel.bridge()
    assert backward._grad_property is first and first._nnterp_bridged


def test_a_tp_plan_load_counts_as_sharded():
    assert _tensor_parallel.wanted("some/repo", {"tp_plan": "auto"})
    assert not _tensor_parallel.wanted("some/repo", {})


def test_backward_grad_outside_the_block_reads_torchs_attribute():
    # code outside the block's own mediators (transformers' gradient hooks) reads torch's .grad
    import nnsight.intervention.backward as backward

    _tensor_parallel.bridge()

    class Session:
        mediators: list = []

    served = backward._grad_property(Session(), set(), [])
    weight = torch.nn.Parameter(torch.ones(2))
    weight.grad = torch.full((2,), 3.0)
    assert torch.equal(served.fget(weight), torch.full((2,), 3.0))
