"""Path patching on a pre-norm, a sandwich and a mixture-of-experts family: each cell against the three runs done with plain
torch hooks on the HF modules, and the exact cases (the whole stream after a head is patch_heads; a receiver before its
sender receives nothing; clean == corrupted changes nothing)."""

import pytest
import torch
from nnterp import InvalidArgument
from nnterp.toolkit.patching import patch_heads
from nnterp.toolkit.path_patching import patch_paths

FAMILIES = ["llama", "gemma2", "mixtral"]
ATOL = 1e-4


# -- the three runs with plain torch hooks on the HF modules ---------------------------------


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def _replacing(output, value):
    return (value, *output[1:]) if isinstance(output, tuple) else value


def contribution(block, part):
    """The HF module whose output is what the block adds to the stream for its attention (part 0) or MLP (part 1)."""
    sandwich = hasattr(block, "post_feedforward_layernorm")
    if part == 0:
        return block.post_attention_layernorm if sandwich else block.self_attn
    return block.post_feedforward_layernorm if sandwich else block.mlp


def receiver_module(model, receiver, width):
    """The HF module a receiver's input is the output of (``pre``: the input of), and the slice of its last axis."""
    hf = model._module.model
    if receiver == "logits":
        return hf.norm, True, slice(None)
    layer, kind, *head = receiver
    block = hf.layers[layer]
    if kind in ("q", "k", "v"):
        # the projection before the rotary embedding: rotating a replaced query or key is replacing the rotated one
        span = slice(head[0] * width, (head[0] + 1) * width)
        return getattr(block.self_attn, f"{kind}_proj"), False, span
    if kind == "attention":
        return block.input_layernorm, False, slice(None)
    if kind == "mlp":
        sandwich = hasattr(block, "post_feedforward_layernorm")
        return (block.pre_feedforward_layernorm if sandwich else block.post_attention_layernorm), False, slice(None)
    raise AssertionError(receiver)


def hf_path_patch(pair, model, sender, receivers, *, freeze="all", positions=None):
    """The three runs by hand: ``sender`` is (layer, head) or (layer, "attention" | "mlp"); ``receivers`` as patch_paths takes them."""
    blocks = model._module.model.layers
    layer, which = sender
    width = model.layers[layer].self_attn.head_dim
    at = slice(None) if positions is None else torch.tensor(positions)
    # 1. the clean run's sender, the corrupted run's contributions
    clean, corrupted = {}, {}
    sending = None if isinstance(which, int) else ("attention", "mlp").index(which)
    if isinstance(which, int):
        hooks = [(blocks[layer].self_attn.o_proj, lambda _, args: clean.__setitem__("z", args[0].clone()))]
        pair.hf_metric(model, pair.clean, pre_hooks=hooks)
    else:
        pair.hf_metric(model, pair.clean, [(contribution(blocks[layer], sending), lambda _, __, out: clean.__setitem__("c", _first(out).clone()))])
    keep = [
        (contribution(blocks[j], part), lambda _, __, out, key=(j, part): corrupted.__setitem__(key, _first(out).clone()))
        for j in range(len(blocks)) for part in (0, 1)
    ]  # fmt: skip
    pair.hf_metric(model, pair.corrupted, keep)
    # 2. the sender clean, every other contribution from its block on frozen; the receivers' inputs recorded
    frozen = (0, 1) if freeze == "all" else (0,)
    forward, pre, recorded = [], [], {}
    if isinstance(which, int):
        def send(_, args, head=slice(which * width, (which + 1) * width)):
            z = args[0].clone()
            z[..., head] = clean["z"][..., head]
            return (z,)

        pre.append((blocks[layer].self_attn.o_proj, send))
    for j in range(layer, len(blocks)):
        for part in frozen:
            if j == layer and part == (0 if sending is None else sending):
                continue
            forward.append((contribution(blocks[j], part), lambda _, __, out, key=(j, part): _replacing(out, corrupted[key])))
    if sending is not None:
        forward.append((contribution(blocks[layer], sending), lambda _, __, out: _replacing(out, clean["c"])))
    for index, receiver in enumerate(receivers):
        module, is_pre, span = receiver_module(model, receiver, width)
        if is_pre:
            pre.append((module, lambda _, args, index=index: recorded.__setitem__(index, args[0].clone())))
        else:
            forward.append((module, lambda _, __, out, index=index: recorded.__setitem__(index, _first(out).clone())))
    pair.hf_metric(model, pair.corrupted, forward, pre)
    # 3. the corrupted run with the receivers' inputs replaced
    forward, pre = [], []
    for index, receiver in enumerate(receivers):
        module, is_pre, span = receiver_module(model, receiver, width)

        def replace(value, index=index, span=span):
            value = value.clone()
            value[:, at, span] = recorded[index][:, at, span]
            return value

        if is_pre:
            pre.append((module, lambda _, args, replace=replace: (replace(args[0]), *args[1:])))
        else:
            forward.append((module, lambda _, __, out, replace=replace: _replacing(out, replace(_first(out)))))
    return pair.hf_metric(model, pair.corrupted, forward, pre)


# -- against the hooks -------------------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILIES)
def test_head_senders_to_a_later_blocks_heads_and_mlp_match_the_three_runs_with_hooks(tiny_model, name, pair):
    model = tiny_model(name)
    last = model.num_layers - 1
    receivers = [(last, "q", 1), (last, "k", 0), (last, "v", 1), (last, "mlp")]
    result = patch_paths(model, pair.clean, pair.corrupted, pair.metric(model), receivers, layers=[0], progress=False)
    assert result.axes == ("layer", "head") and result.values.shape == (1, model.layers[0].self_attn.num_heads)
    assert result.metric_corrupted == pytest.approx(pair.hf_metric(model, pair.corrupted), abs=ATOL)
    for head in range(result.values.shape[1]):
        assert result.values[0, head].item() == pytest.approx(hf_path_patch(pair, model, (0, head), receivers), abs=ATOL)
    assert (result.values - result.metric_corrupted).abs().max() > 1e-3  # the paths carry something
    # the queries and keys alone (every head, one receiver each) move the metric less: still over the tolerance
    attention = model.layers[last].self_attn
    receivers = [(last, "q", h) for h in range(attention.num_heads)] + [(last, "k", g) for g in range(attention.num_kv_heads)]
    result = patch_paths(model, pair.clean, pair.corrupted, pair.metric(model), receivers, layers=[0], progress=False)
    for head in range(result.values.shape[1]):
        assert result.values[0, head].item() == pytest.approx(hf_path_patch(pair, model, (0, head), receivers), abs=ATOL)
    assert (result.values - result.metric_corrupted).abs().max() > 2 * ATOL


@pytest.mark.parametrize("name", FAMILIES)
def test_sublayer_senders_to_an_attention_input_and_the_logits_match_the_hooks_at_chosen_positions(tiny_model, name, pair):
    model = tiny_model(name)
    last = model.num_layers - 1
    positions = [pair.differing_position(model), -1]
    receivers = [(last, "attention"), "logits"]
    for freeze in ("all", "attention"):
        result = patch_paths(
            model, pair.clean, pair.corrupted, pair.metric(model), receivers, senders="sublayers", layers=[0], positions=positions, freeze=freeze, progress=False
        )  # fmt: skip
        assert result.labels["sublayer"] == ["attention_output", "mlp_output"]
        for column, which in enumerate(("attention", "mlp")):
            direct = hf_path_patch(pair, model, (0, which), receivers, freeze=freeze, positions=positions)
            assert result.values[0, column].item() == pytest.approx(direct, abs=ATOL)
        assert (result.values - result.metric_corrupted).abs().max() > 1e-3


# -- the exact cases ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILIES)
def test_the_whole_stream_after_a_head_with_mlps_recomputing_is_patch_heads(tiny_model, name, pair):
    model = tiny_model(name)
    metric, last = pair.metric(model), model.num_layers - 1
    heads = patch_heads(model, pair.clean, pair.corrupted, metric, progress=False)
    # the stream entering the next block carries everything the head changed: its path there is its whole effect
    for layer in range(last):
        paths = patch_paths(model, pair.clean, pair.corrupted, metric, [(layer + 1, "stream")], layers=[layer], freeze="attention", progress=False)
        torch.testing.assert_close(paths.values[0], heads.values[layer], atol=ATOL, rtol=0)
    final = patch_paths(model, pair.clean, pair.corrupted, metric, ["logits"], layers=[last], freeze="attention", progress=False)
    torch.testing.assert_close(final.values[0], heads.values[last], atol=ATOL, rtol=0)
    # frozen, the block's own MLP no longer carries the head's change: a different (direct-only) effect
    frozen = patch_paths(model, pair.clean, pair.corrupted, metric, [(1, "stream")], layers=[0], progress=False)
    assert (frozen.values[0] - heads.values[0]).abs().max() > 1e-4


@pytest.mark.parametrize("name", FAMILIES)
def test_an_mlp_senders_path_to_the_next_stream_is_patching_that_mlp_everywhere(tiny_model, name, pair):
    model = tiny_model(name)
    metric = pair.metric(model)
    paths = patch_paths(model, pair.clean, pair.corrupted, metric, [(1, "stream")], senders="sublayers", layers=[0], progress=False)
    source, out = [], []
    with torch.no_grad(), model.trace(pair.clean):
        source.append(model.layers[0].mlp.mlp_output.clone())
    with torch.no_grad(), model.trace(pair.corrupted):
        model.layers[0].mlp.mlp_output = source[0]
        out.append(metric(model.logits))
    assert paths.values[0, 1].item() == pytest.approx(float(out[0]), abs=ATOL)
    assert paths.values[0, 1].item() != pytest.approx(paths.metric_corrupted, abs=1e-3)


@pytest.mark.parametrize("name", FAMILIES)
def test_receivers_before_their_sender_receive_nothing_and_clean_into_itself_changes_nothing(tiny_model, name, pair):
    model = tiny_model(name)
    metric = pair.metric(model)
    # block 0's attention inputs and the stream entering it come before every head
    early = [(0, "stream"), (0, "attention"), (0, "q"), (0, "k"), (0, "v")]
    result = patch_paths(model, pair.clean, pair.corrupted, metric, early, progress=False)
    torch.testing.assert_close(result.values, torch.full_like(result.values, result.metric_corrupted), atol=ATOL, rtol=0)
    # block 0's MLP input comes after block 0's heads but before block 1's sublayers
    mlp = patch_paths(model, pair.clean, pair.corrupted, metric, [(0, "mlp")], senders="sublayers", progress=False)
    torch.testing.assert_close(mlp.values[1:], torch.full_like(mlp.values[1:], mlp.metric_corrupted), atol=ATOL, rtol=0)
    assert mlp.values[0, 1].item() == pytest.approx(mlp.metric_corrupted, abs=ATOL)  # its own output is after it
    assert mlp.values[0, 0].item() != pytest.approx(mlp.metric_corrupted, abs=1e-3)
    same = patch_paths(model, pair.clean, pair.clean, metric, [(model.num_layers - 1, "k"), "logits"], progress=False)
    assert same.metric_clean == pytest.approx(same.metric_corrupted, abs=ATOL)
    torch.testing.assert_close(same.values, torch.full_like(same.values, same.metric_clean), atol=ATOL, rtol=0)


def test_packing_senders_changes_no_cell_and_batches_pair_up(tiny_model, pair):
    model = tiny_model("llama")
    metric = pair.metric(model)
    receivers = [(2, "k"), (1, "mlp")]
    packed = patch_paths(model, pair.clean, pair.corrupted, metric, receivers, progress=False)
    alone = patch_paths(model, pair.clean, pair.corrupted, metric, receivers, cells_per_forward=1, progress=False)
    assert packed.forwards == 2 * model.num_layers and alone.forwards == 2 * packed.values.numel()
    torch.testing.assert_close(packed.values, alone.values, atol=ATOL, rtol=0)
    assert packed.site == "self_attn.attention_head_outputs -> layers.1.mlp_input, layers.2.self_attn.attention_keys[0, 1]"
    batch = patch_paths(model, [pair.clean, "Hi J"], [pair.corrupted, "Hi M"], metric, receivers, layers=[0], heads=[2], progress=False)
    assert batch.values.shape == (1, 1) and batch.labels == {"layer": ["0"], "head": ["2"]}


def test_bad_receivers_and_arguments_fail_before_the_model_runs(tiny_model, pair):
    model = tiny_model("llama")
    metric = pair.metric(model)
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    bad = [
        ([(1, "z")], r"patch_paths\(receivers=.*item \(1, 'z'\): expected \(layer, \"q\""),
        ([(7, "q")], r"receivers=.*the model has 3 blocks"),
        ([(1, "k", 2)], r"item \(1, 'k', 2\): .*2 key/value heads .*grouped-query attention: each serves 2 query heads"),
        ([(1, "mlp", 0)], r"a 'mlp' receiver has no heads"),
        ([], r"expected a list of receivers"),
    ]
    try:
        for receivers, match in bad:
            with pytest.raises(InvalidArgument, match=match):
                patch_paths(model, pair.clean, pair.corrupted, metric, receivers, progress=False)
        with pytest.raises(InvalidArgument, match=r"freeze="):
            patch_paths(model, pair.clean, pair.corrupted, metric, ["logits"], freeze="mlp", progress=False)
        with pytest.raises(InvalidArgument, match=r"senders="):
            patch_paths(model, pair.clean, pair.corrupted, metric, ["logits"], senders="neurons", progress=False)
        with pytest.raises(InvalidArgument, match=r"heads=.*leave heads=None"):
            patch_paths(model, pair.clean, pair.corrupted, metric, ["logits"], senders="sublayers", heads=[0], progress=False)
        with pytest.raises(InvalidArgument, match="same length"):
            patch_paths(model, pair.clean, pair.corrupted + " then", metric, ["logits"], progress=False)
    finally:
        hook.remove()
    assert not calls
    gptj = tiny_model("gptj")
    with pytest.raises(InvalidArgument, match=r"parallel block.*\(1, \"q\"\)"):
        patch_paths(gptj, pair.clean, pair.corrupted, pair.metric(gptj), [(1, "attention")], progress=False)
