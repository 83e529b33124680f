"""Tracing mistakes brought from nnsight and TransformerLens are said in standard names, with the rule and the fix.

Each case runs the mistake on a tiny checkpoint, asserts the error's type (a
``TracingMistake``, and where nnsight raised one, a subclass of its type, so an
``except`` written for nnsight still catches it) and that the message names
the value as the user wrote it, the variable where there is one, and the fix;
then runs the fix.
"""

from __future__ import annotations

import contextlib
import threading
import warnings

import pytest
import torch
from nnsight.intervention.interleaver import OutOfOrderError
from nnterp import StandardizedTransformer
from nnterp.errors import (
    FrozenWeights,
    GradientOrder,
    GradientOutsideBackward,
    InvokeBeforeBarrier,
    LoopCutShort,
    NestedTrace,
    OutsideTrace,
    ReadInBackward,
    TracingMistake,
    UnsavedValue,
)
from nnterp_conformance import tiny_checkpoint

pytestmark = pytest.mark.xdist_group("gpt2")
PROMPT = "The Eiffel Tower is in"


@pytest.fixture(scope="module")
def model(tiny_model):
    model = tiny_model("gpt2")
    with torch.no_grad(), model.trace(PROMPT):  # warm: the weights are loaded
        model.logits.save()
    return model


def _logits(model, prompt=PROMPT):
    with torch.no_grad(), model.trace(prompt):
        logits = model.logits.save()
    return logits


# -- 1. a value used after the trace without .save() ----------------------------------------


def test_a_value_not_saved_says_so_at_its_next_use(model):
    with model.trace(PROMPT):
        hidden = model.layers[0].layer_output
    with pytest.raises(UnsavedValue) as raised:
        hidden.shape
    assert isinstance(raised.value, NameError) and isinstance(raised.value, TracingMistake)
    message = str(raised.value)
    assert "hidden was bound to layers[0].layer_output" in message
    assert "hidden = model.layers[0].layer_output.save()" in message
    for use in (lambda: hidden + 1, lambda: torch.stack([hidden]), lambda: hidden[0], lambda: float(hidden), lambda: print(hidden)):
        with pytest.raises(UnsavedValue):
            use()
    assert "hidden" in repr(hidden)


def test_a_computed_tensor_not_saved_says_so_and_saved_ones_leave_as_before(model):
    stale = torch.zeros(1)
    with model.trace(PROMPT):
        scaled = model.layers[1].layer_output * 2
        stale = scaled.sum()
        kept = model.layers[1].layer_output.save()
        intermediate = model.logits
        top = intermediate[:, -1].argmax(-1).save()
    with pytest.raises(UnsavedValue, match="stale was bound to a tensor computed inside the trace"):
        stale.item()
    assert isinstance(kept, torch.Tensor) and isinstance(top, torch.Tensor)
    assert kept.shape[-1] == model.hidden_size


def test_a_list_of_saved_values_not_saved_itself_says_save_the_list(model):
    with model.trace(PROMPT):
        outputs = [layer.layer_output.save() for layer in model.layers]
        numbers = [1, 2]
    with pytest.raises(UnsavedValue, match=r"(?s)outputs was bound to a list of tensors .*outputs = nnsight.save\(\[...\]\)"):
        len(outputs)
    with pytest.raises(NameError):
        numbers  # noqa: B018 - nothing but tensors is rebound: nnsight's own NameError


def test_a_list_made_before_the_trace_and_filled_inside_keeps_its_elements(model):
    outputs: list = []
    grads: list = []
    with model.trace(PROMPT):
        hidden = model.layers[1].layer_output.save()
        outputs.append(model.layers[1].layer_output)
        metric = model.logits[0, -1].sum()
        with metric.backward():
            grads.append(hidden.grad.clone())  # a nested tracer's push marks the list as written in the trace
    assert len(outputs) == 1 and torch.equal(outputs[0], hidden)
    assert len(grads) == 1 and grads[0].shape == hidden.shape


def test_in_a_session_values_still_flow_between_traces_without_save(model):
    with model.session():
        with model.trace(PROMPT):
            hidden = model.layers[0].layer_output
        with model.trace(PROMPT):
            model.layers[0].layer_output = hidden
            logits = model.logits.save()
    assert torch.allclose(logits, _logits(model), atol=1e-5)


# -- 2. a trace inside a trace ---------------------------------------------------------------


def test_a_nested_trace_is_refused_at_its_entry_with_invokes_as_the_fix(model):
    reference = _logits(model)
    with pytest.raises(NestedTrace) as raised:
        with model.trace(PROMPT):
            with model.trace("Hello world"):
                model.layers[0].layer_output.save()
    assert isinstance(raised.value, ValueError)
    message = str(raised.value)
    assert "inside another trace" in message and "tracer.invoke(prompt_a)" in message and "one after the other" in message
    assert torch.equal(_logits(model), reference)


# -- 3. a value patched across invokes without a barrier ------------------------------------


def test_a_value_from_another_invoke_without_a_barrier_names_it_and_spells_out_the_barrier(model):
    with pytest.raises(InvokeBeforeBarrier) as raised:
        with model.trace() as tracer:
            with tracer.invoke(PROMPT):
                source = model.layers[0].layer_output
            with tracer.invoke("Hello world, my friend"):
                model.layers[0].layer_output = source
    assert isinstance(raised.value, NameError)
    message = str(raised.value)
    assert "source is bound in invoke 1 (to model.layers[0].layer_output) and read in invoke 2" in message
    assert "barrier = tracer.barrier(2)" in message and "barrier()" in message
    assert "model.layers[0].layer_output = source" in message


def test_the_barrier_form_patches_across_invokes(model):
    donor, receiver = torch.tensor([[5, 6, 7, 8]]), torch.tensor([[9, 10, 11, 12]])
    with torch.no_grad(), model.trace() as tracer:
        barrier = tracer.barrier(2)
        with tracer.invoke(donor):
            source = model.layers[0].layer_output
            barrier()
        with tracer.invoke(receiver):
            barrier()
            model.layers[0].layer_output = source
            patched = model.logits.save()
    assert torch.allclose(patched, _logits(model, donor), atol=1e-5)
    assert not torch.allclose(patched, _logits(model, receiver), atol=1e-3)


# -- 4, 5. gradients ---------------------------------------------------------------------------


@pytest.mark.parametrize("bridged", [False, True], ids=["plain", "tensor-parallel bridge installed"])
def test_gradients_read_in_forward_order_say_backward_order_and_name_both(model, bridged):
    from nnterp._patches.nnsight import BACKWARD_GRAD_FOR_BLOCKS

    # bridged, its Tensor.grad getter (argument `tensor`) is the innermost frame: the names are still the user's
    with BACKWARD_GRAD_FOR_BLOCKS if bridged else contextlib.nullcontext():
        _gradients_read_in_forward_order(model)


def _gradients_read_in_forward_order(model):
    with pytest.raises(GradientOrder) as raised:
        with model.trace(PROMPT):
            early = model.layers[0].layer_output
            late = model.layers[1].layer_output
            metric = model.logits[:, -1].sum()
            with metric.backward():
                early_grad = early.grad.save()
                late_grad = late.grad.save()
    assert isinstance(raised.value, OutOfOrderError)
    message = str(raised.value)
    assert "late.grad (layers[1].layer_output) was read after early.grad (layers[0].layer_output)" in message
    assert "reverse (backward) order" in message and "late_grad = late.grad.save()" in message
    with model.trace(PROMPT):
        early = model.layers[0].layer_output
        late = model.layers[1].layer_output
        metric = model.logits[:, -1].sum()
        with metric.backward():
            late_grad = late.grad.save()
            early_grad = early.grad.save()
    assert early_grad.shape == late_grad.shape


def test_a_value_first_read_inside_backward_says_read_it_in_the_forward(model):
    with pytest.raises(ReadInBackward) as raised:
        with model.trace(PROMPT):
            metric = model.logits[:, -1].sum()
            with metric.backward():
                model.layers[1].layer_output.grad.save()
    message = str(raised.value)
    assert isinstance(raised.value, OutOfOrderError)
    assert "layers[1].layer_output was read inside `with metric.backward():`" in message
    assert "before backward()" in message and "value = model.layers[1].layer_output" in message
    assert "did not run" not in message


# -- 6. a value outside a trace ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["layers.0.layer_output", "layers.1.self_attn.attention_output", "logits"])
def test_a_value_outside_a_trace_names_it_and_says_trace_and_save(model, name):
    *path, value = name.split(".")
    host = model
    for segment in path:
        host = host[int(segment)] if segment.isdigit() else getattr(host, segment)
    spelled = name.replace(".0.", "[0].").replace(".1.", "[1].")
    with pytest.raises(OutsideTrace) as raised:
        getattr(host, value).shape
    assert isinstance(raised.value, ValueError)
    message = str(raised.value)
    assert f"{spelled} was read outside a trace" in message and f"value = model.{spelled}.save()" in message
    assert "model.transformer" not in message


def test_a_write_outside_a_trace_says_assign_it_inside(model):
    with pytest.raises(OutsideTrace, match=r"layers\[0\].layer_output was written outside a trace"):
        model.layers[0].layer_output = torch.zeros(1)


# -- 7. .grad of the user's own tensors inside a trace -----------------------------------------


def _own_grads():
    """``.grad`` of a non-leaf and of a leaf after backward, with the warnings torch gives: what a trace must not change."""
    leaf = torch.ones(3, requires_grad=True)
    product = leaf * 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        non_leaf = product.grad
    product.sum().backward()
    return non_leaf, leaf.grad.clone(), [str(warning.message)[:40] for warning in caught]


def test_grad_of_the_users_own_tensors_inside_a_trace_is_torchs(model):
    plain = _own_grads()
    inside = []
    with model.trace(PROMPT):
        inside.append(_own_grads())
        model.logits.save()
    assert inside[0][0] is None and plain[0] is None
    assert torch.equal(inside[0][1], plain[1]) and inside[0][2] == plain[2] and plain[2]


def test_grad_in_another_thread_during_a_trace_is_torchs(model):
    found = []
    with model.trace(PROMPT):
        worker = threading.Thread(target=lambda: found.append(_own_grads()))
        worker.start()
        worker.join()
        model.logits.save()
    assert found[0][0] is None and torch.equal(found[0][1], torch.full((3,), 2.0))


def test_grad_of_a_served_value_outside_backward_still_raises(model):
    with pytest.raises(GradientOutsideBackward, match=r"layers\[1\].layer_output.grad"):
        with model.trace(PROMPT):
            model.layers[1].layer_output.grad.save()


@contextlib.contextmanager
def frozen(model):
    """The weights frozen as NDIF's servers load them (``requires_grad_(False)``), trainable again after."""
    model._module.requires_grad_(False)
    try:
        yield
    finally:
        model._module.requires_grad_(True)


def _gradients(model, track: bool):
    with model.trace(PROMPT):
        if track:
            model.layers[0].layer_input.requires_grad_(True)
        value = model.layers[1].layer_output
        metric = model.logits[:, -1].sum()
        with metric.backward():
            gradient = value.grad.save()
    return gradient


def test_a_backward_on_frozen_weights_names_the_line_that_tracks_the_stream(model):
    with frozen(model), pytest.raises(FrozenWeights, match=r"model.layers\[0\].layer_input.requires_grad_\(True\)"):
        _gradients(model, track=False)
    with pytest.raises(NotImplementedError):  # still what nnsight raised, to an `except` written for it
        with frozen(model):
            _gradients(model, track=False)


def test_tracking_the_stream_gives_frozen_weights_the_gradients_of_trainable_ones(model):
    trainable = _gradients(model, track=False)
    with frozen(model):
        tracked = _gradients(model, track=True)
    assert tracked.abs().sum() > 0 and torch.equal(tracked, trainable)
    assert torch.equal(_gradients(model, track=True), trainable)  # with trainable weights the line changes nothing


def test_grad_outside_backward_on_frozen_weights_blames_the_weights_not_no_grad(model):
    with frozen(model), pytest.raises(GradientOutsideBackward, match="weights are frozen") as raised:
        with model.trace(PROMPT):
            model.layers[1].layer_output.grad.save()
    assert "no_grad" not in str(raised.value)


# -- 8. weights before the first trace ---------------------------------------------------------


def test_weights_load_at_the_first_trace_or_at_dispatch():
    lazy = StandardizedTransformer(tiny_checkpoint("gpt2"))
    early = lazy._module
    assert not lazy.dispatched and lazy.lm_head.weight.is_meta  # what the docstring says: meta until loaded
    lazy.dispatch()
    assert lazy.dispatched and not lazy.lm_head.weight.is_meta and not any(p.is_meta for p in lazy._module.parameters())
    assert early is not lazy._module and early.lm_head.weight.is_meta  # a handle taken before stays meta
    with torch.no_grad(), lazy.trace(PROMPT):
        logits = lazy.logits.save()
    assert torch.isfinite(logits).all()


# -- 9. statements after an open tracer.all() loop ----------------------------------------------


def test_a_statement_after_an_open_loop_says_it_never_ran(model):
    with pytest.warns(UserWarning, match="was never reached"):
        with model.generate(PROMPT, max_new_tokens=2) as tracer:
            for step in tracer.all():
                hidden = model.layers[0].layer_output.save()
            ids = tracer.result.save()
    with pytest.raises(LoopCutShort) as raised:
        ids.shape
    assert isinstance(raised.value, NameError)
    message = str(raised.value)
    assert "ids was never bound" in message and "tracer.all()" in message and "with tracer.invoke():" in message
    assert hidden.shape[-1] == model.hidden_size


def test_the_loop_in_an_invoke_of_its_own_keeps_what_follows(model):
    with pytest.warns(UserWarning, match="was never reached"):
        with model.generate(max_new_tokens=2) as tracer:
            with tracer.invoke(PROMPT):
                for step in tracer.all():
                    hidden = model.layers[0].layer_output.save()
            with tracer.invoke():
                ids = tracer.result.save()
    assert ids.shape[-1] == len(model.tokenizer(PROMPT)["input_ids"]) + 2
