"""Patching sweeps on three kinds of block (pre-norm, parallel, sandwich): each cell against a direct edit, and the exact cases."""

import pytest
import torch
from nnterp import InvalidArgument, Unavailable
from nnterp.toolkit.patching import Sweep, patch_attention_output, patch_heads, patch_heads_by_position, patch_mlp_output, patch_residual

FAMILIES = ["llama", "gptj", "gemma2"]
SWEEPS = [patch_residual, patch_attention_output, patch_mlp_output, patch_heads]
ATOL = 1e-4


def run_metric(pair, model, prompt, edit=None):
    """The metric of one run of ``prompt``, with ``edit()`` applied inside the trace."""
    metric, out = pair.metric(model), []
    with torch.no_grad(), model.trace(prompt):
        if edit is not None:
            edit()
        out.append(metric(model.logits))
    return float(out[0])


def clean_value(pair, model, read):
    out = []
    with torch.no_grad(), model.trace(pair.clean):
        out.append(read().clone())
    return out[0]


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("sweep", SWEEPS, ids=lambda f: f.__name__)
def test_patching_the_clean_run_into_itself_changes_nothing(tiny_model, name, sweep, pair):
    model = tiny_model(name)
    result = sweep(model, pair.clean, pair.clean, pair.metric(model), progress=False)
    assert result.metric_clean == pytest.approx(run_metric(pair, model, pair.clean), abs=ATOL)
    assert result.metric_corrupted == pytest.approx(result.metric_clean, abs=ATOL)
    torch.testing.assert_close(result.values, torch.full_like(result.values, result.metric_clean), atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", FAMILIES)
def test_residual_patches_restore_the_clean_run_exactly_where_they_carry_everything(tiny_model, name, pair):
    model = tiny_model(name)
    metric = pair.metric(model)
    differ, length = pair.differing_position(model), len(model.tokenizer(pair.clean)["input_ids"])
    result = patch_residual(model, pair.clean, pair.corrupted, metric, progress=False)
    assert result.metric_clean == pytest.approx(run_metric(pair, model, pair.clean), abs=ATOL)
    assert result.metric_corrupted == pytest.approx(run_metric(pair, model, pair.corrupted), abs=ATOL)
    normalized = result.normalized().values
    # layer 0's input is the embeddings: the one differing token restores the clean run, the rest change nothing
    expected = torch.zeros(length)
    expected[differ] = 1
    torch.testing.assert_close(normalized[0], expected, atol=ATOL, rtol=0)
    # before the differing token the two runs agree at every layer
    torch.testing.assert_close(normalized[:, :differ], torch.zeros(model.num_layers, differ), atol=ATOL, rtol=0)
    # the last block's output at the last position is all the metric reads
    last = patch_residual(model, pair.clean, pair.corrupted, metric, layers=[-1], stream="layer_output", progress=False)
    expected = torch.zeros(1, length)
    expected[0, -1] = 1
    torch.testing.assert_close(last.normalized().values, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", FAMILIES)
def test_residual_cell_matches_writing_the_previous_block_output(tiny_model, name, pair):
    model = tiny_model(name)
    differ = pair.differing_position(model)
    result = patch_residual(model, pair.clean, pair.corrupted, pair.metric(model), layers=[1], positions=[differ, -1], progress=False)
    source = clean_value(pair, model, lambda: model.layers[0].layer_output)
    for column, position in enumerate([differ, -1]):

        def edit(position=position):
            model.layers[0].layer_output[:, position] = source[:, position]

        assert result.values[0, column].item() == pytest.approx(run_metric(pair, model, pair.corrupted, edit), abs=ATOL)


@pytest.mark.parametrize("name", FAMILIES)
def test_last_mlp_cell_matches_adding_its_change_to_the_block_output(tiny_model, name, pair):
    # layer_input + attention_output + mlp_output == layer_output, and the last MLP feeds nothing else
    model = tiny_model(name)
    last = model.num_layers - 1
    result = patch_mlp_output(model, pair.clean, pair.corrupted, pair.metric(model), layers=[last], positions=[-1], progress=False)
    clean = clean_value(pair, model, lambda: model.layers[last].mlp.mlp_output)
    deltas = []
    with torch.no_grad(), model.trace(pair.corrupted):
        deltas.append((clean - model.layers[last].mlp.mlp_output).clone())

    def edit():
        model.layers[last].layer_output[:, -1] += deltas[0][:, -1]

    assert result.values[0, 0].item() == pytest.approx(run_metric(pair, model, pair.corrupted, edit), abs=ATOL)
    assert result.values[0, 0].item() != pytest.approx(result.metric_corrupted, abs=ATOL)


@pytest.mark.parametrize("name", FAMILIES)
def test_attention_cell_matches_an_in_place_edit(tiny_model, name, pair):
    model = tiny_model(name)
    differ = pair.differing_position(model)
    result = patch_attention_output(model, pair.clean, pair.corrupted, pair.metric(model), layers=[0], positions=[differ], progress=False)
    source = clean_value(pair, model, lambda: model.layers[0].self_attn.attention_output)

    def edit():
        model.layers[0].self_attn.attention_output[:, differ] = source[:, differ]

    assert result.values[0, 0].item() == pytest.approx(run_metric(pair, model, pair.corrupted, edit), abs=ATOL)
    assert result.values[0, 0].item() != pytest.approx(result.metric_corrupted, abs=ATOL)


@pytest.mark.parametrize("name", FAMILIES)
def test_head_cell_matches_writing_that_head_into_the_output_projection(tiny_model, name, pair):
    model = tiny_model(name)
    attention = model.layers[0].self_attn
    head, width = 1, attention.head_dim
    result = patch_heads(model, pair.clean, pair.corrupted, pair.metric(model), layers=[0], heads=[head], progress=False)
    source = clean_value(pair, model, lambda: attention.o_proj.input)
    span = slice(head * width, (head + 1) * width)

    def edit():
        attention.o_proj.input[..., span] = source[..., span]

    assert result.values[0, 0].item() == pytest.approx(run_metric(pair, model, pair.corrupted, edit), abs=ATOL)
    assert result.values[0, 0].item() != pytest.approx(result.metric_corrupted, abs=ATOL)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("sweep", SWEEPS, ids=lambda f: f.__name__)
def test_the_corrupted_run_moves_toward_the_clean_one_somewhere(tiny_model, name, sweep, pair):
    model = tiny_model(name)
    differ = pair.differing_position(model)
    result = sweep(model, pair.clean, pair.corrupted, pair.metric(model), progress=False)
    assert result.metric_clean != pytest.approx(result.metric_corrupted, abs=1e-3)
    normalized = result.normalized().values
    assert ((normalized > 0.05) & (normalized < 1.95)).any()
    if result.axes[1] == "position":
        # causal attention: positions before the change see identical runs
        torch.testing.assert_close(normalized[:, :differ], torch.zeros(len(normalized), differ), atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", FAMILIES)
def test_axes_and_labels_name_the_grid(tiny_model, name, pair):
    model = tiny_model(name)
    tokens = [model.tokenizer.decode([t]) for t in model.tokenizer(pair.clean)["input_ids"]]
    layers = model.num_layers
    result = patch_residual(model, pair.clean, pair.corrupted, pair.metric(model), layers=[0, -1], positions=[-2, -1], progress=False)
    assert result.axes == ("layer", "position")
    assert result.values.shape == (2, 2) and result.values.dtype == torch.float32 and result.values.device.type == "cpu"
    assert result.labels == {"layer": ["0", str(layers - 1)], "position": tokens[-2:]}
    assert result.site == "layer_input"
    full = patch_mlp_output(model, pair.clean, pair.corrupted, pair.metric(model), progress=False)
    assert full.values.shape == (layers, len(tokens))
    assert full.labels == {"layer": [str(i) for i in range(layers)], "position": tokens}
    heads = patch_heads(model, pair.clean, pair.corrupted, pair.metric(model), progress=False)
    assert heads.axes == ("layer", "head")
    assert heads.values.shape == (layers, model.layers[0].self_attn.num_heads)
    assert heads.labels == {"layer": [str(i) for i in range(layers)], "head": [str(h) for h in range(model.layers[0].self_attn.num_heads)]}


def test_batches_pair_prompts_and_label_the_padded_first_row(tiny_model, pair):
    model = tiny_model("llama")
    clean, corrupted = [pair.clean, "Hi J"], [pair.corrupted, "Hi M"]
    result = patch_residual(model, clean, corrupted, pair.metric(model), layers=[0], progress=False)
    width = len(model.tokenizer(pair.clean)["input_ids"])
    assert result.values.shape == (1, width)
    # the batch's metric: the same batch patched at a position where neither pair differs leaves it corrupted
    assert result.values[0, 0].item() == pytest.approx(result.metric_corrupted, abs=ATOL)
    assert result.metric_clean == pytest.approx(run_metric(pair, model, clean), abs=ATOL)


def test_prompts_of_different_lengths_fail_before_the_model_runs(tiny_model, pair):
    model = tiny_model("llama")
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(InvalidArgument, match="same length"):
            patch_residual(model, pair.clean, pair.corrupted + " then", pair.metric(model), progress=False)
        with pytest.raises(InvalidArgument, match="pairs them one to one"):
            patch_heads(model, [pair.clean, pair.clean], [pair.corrupted], pair.metric(model), progress=False)
        with pytest.raises(InvalidArgument, match=r"patch_residual\(layers=\[9\]\): item 9: the model has 3 blocks"):
            patch_residual(model, pair.clean, pair.corrupted, pair.metric(model), layers=[9], progress=False)
    finally:
        hook.remove()
    assert not calls


def test_a_metric_must_return_one_number(tiny_model, pair):
    model = tiny_model("llama")
    with pytest.raises(ValueError, match="one number"):
        patch_residual(model, pair.clean, pair.corrupted, lambda logits: logits[:, -1, :3], progress=False)


def test_a_value_the_family_lacks_raises_its_unavailable(tiny_model, pair):
    with pytest.raises(Unavailable, match="parallel"):
        patch_residual(tiny_model("gptj"), pair.clean, pair.corrupted, pair.metric(tiny_model("gptj")), stream="layer_mid", progress=False)
    sdpa = tiny_model("llama", attn_implementation="sdpa")
    with pytest.raises(Unavailable, match="eager"):
        patch_heads(sdpa, pair.clean, pair.corrupted, pair.metric(sdpa), progress=False)


def test_remote_local_gives_the_same_sweep(tiny_model, pair):
    model = tiny_model("llama")
    kwargs = dict(layers=[1], positions=[-3, -1], progress=False)
    here = patch_residual(model, pair.clean, pair.corrupted, pair.metric(model), **kwargs)
    local = patch_residual(model, pair.clean, pair.corrupted, pair.metric(model), remote="local", **kwargs)
    torch.testing.assert_close(local.values, here.values)


def test_normalized_is_the_fraction_of_the_gap():
    sweep = Sweep(torch.tensor([[1.0, 3.0], [2.0, 5.0]]), ("layer", "position"), {"layer": ["0", "1"], "position": ["a", "b"]}, 3.0, 1.0)
    normalized = sweep.normalized()
    torch.testing.assert_close(normalized.values, torch.tensor([[0.0, 1.0], [0.5, 2.0]]))
    assert (normalized.metric_clean, normalized.metric_corrupted) == (1.0, 0.0)
    torch.testing.assert_close(normalized.normalized().values, normalized.values)
    assert normalized.labels == sweep.labels and normalized.axes == sweep.axes
    with pytest.raises(ValueError, match="same metric"):
        Sweep(sweep.values, sweep.axes, sweep.labels, 2.0, 2.0).normalized()



# -- per-position head patching --------------------------------------------------------

BY_POSITION = ["llama", "gemma2", "mixtral"]


def hf_o_proj_input(pair, model, prompt, layer):
    """The input of layer ``layer``'s HF ``o_proj`` (every head's output, joined) in a plain forward of ``prompt``."""
    kept = []
    o_proj = model.layers[layer].self_attn._module.o_proj
    pair.hf_metric(model, prompt, pre_hooks=[(o_proj, lambda _, args: kept.append(args[0].clone()))])
    return kept[0]


@pytest.mark.parametrize("name", BY_POSITION)
def test_head_position_cells_match_writing_that_slice_of_the_hf_o_proj_input(tiny_model, name, pair):
    model = tiny_model(name)
    differ = pair.differing_position(model)
    last = model.num_layers - 1
    result = patch_heads_by_position(model, pair.clean, pair.corrupted, pair.metric(model), layers=[0, last], heads=[1, 2], positions=[differ, -1], progress=False)
    assert result.axes == ("layer", "head", "position") and result.values.shape == (2, 2, 2)
    assert result.metric_corrupted == pytest.approx(pair.hf_metric(model, pair.corrupted), abs=ATOL)
    moved = 0
    for row, layer in enumerate([0, last]):
        source = hf_o_proj_input(pair, model, pair.clean, layer)
        o_proj = model.layers[layer].self_attn._module.o_proj
        width = model.layers[layer].self_attn.head_dim
        for column, head in enumerate([1, 2]):
            for depth, position in enumerate([differ, -1]):

                def write(_, args, head=head, position=position):
                    joined = args[0].clone()
                    span = slice(head * width, (head + 1) * width)
                    joined[:, position, span] = source[:, position, span]
                    return (joined,)

                direct = pair.hf_metric(model, pair.corrupted, pre_hooks=[(o_proj, write)])
                assert result.values[row, column, depth].item() == pytest.approx(direct, abs=ATOL)
                moved += direct != pytest.approx(result.metric_corrupted, abs=ATOL)
    assert moved  # some cell moves the metric, so the comparison could tell cells apart


@pytest.mark.parametrize("name", BY_POSITION)
def test_head_positions_before_the_change_do_nothing_and_a_last_token_change_is_patch_heads(tiny_model, name, pair):
    model = tiny_model(name)
    metric = pair.metric(model)
    differ = pair.differing_position(model)
    result = patch_heads_by_position(model, pair.clean, pair.corrupted, metric, progress=False)
    heads = patch_heads(model, pair.clean, pair.corrupted, metric, progress=False)
    assert result.values.shape == (*heads.values.shape, len(result.labels["position"]))
    # causal attention: before the differing token every head's output is the same in both runs
    before = result.values[:, :, :differ]
    torch.testing.assert_close(before, torch.full_like(before, result.metric_corrupted), atol=ATOL, rtol=0)
    assert (result.metric_clean, result.metric_corrupted) == (heads.metric_clean, heads.metric_corrupted)
    # prompts that differ in their last token only: each head's outputs differ at that position alone, so patching
    # the head there is patching the head everywhere (patch_heads' cell), and anywhere else changes nothing
    clean, corrupted = pair.clean + " J", pair.corrupted[: pair.corrupted.index(" M")] + " J gave it to M"
    assert len(model.tokenizer(clean)["input_ids"]) == len(model.tokenizer(corrupted)["input_ids"])
    tail = patch_heads_by_position(model, clean, corrupted, metric, progress=False)
    whole = patch_heads(model, clean, corrupted, metric, progress=False)
    torch.testing.assert_close(tail.values[:, :, -1], whole.values, atol=ATOL, rtol=0)
    rest = tail.values[:, :, :-1]
    torch.testing.assert_close(rest, torch.full_like(rest, tail.metric_corrupted), atol=ATOL, rtol=0)
    assert (whole.values - whole.metric_corrupted).abs().max() > 1e-3


def test_head_position_sweeps_label_select_and_refuse_like_the_others(tiny_model, pair):
    model = tiny_model("llama")
    tokens = [model.tokenizer.decode([t]) for t in model.tokenizer(pair.clean)["input_ids"]]
    result = patch_heads_by_position(model, pair.clean, pair.corrupted, pair.metric(model), layers=[-1], heads=[3, 0], positions=[-2, -1], progress=False)
    assert result.labels == {"layer": [str(model.num_layers - 1)], "head": ["3", "0"], "position": tokens[-2:]}
    assert result.values.dtype == torch.float32 and result.values.device.type == "cpu"
    assert result.forwards == 1
    one = result.select(head=1)
    assert one.axes == ("layer", "position") and one.labels == {"layer": result.labels["layer"], "position": tokens[-2:]}
    torch.testing.assert_close(one.values, result.values[:, 1])
    torch.testing.assert_close(result.select(position=-1).values, result.values[..., -1])
    torch.testing.assert_close(result.normalized().select(head=0).values, result.select(head=0).normalized().values)
    with pytest.raises(ValueError, match="no axis 'neuron'"):
        result.select(neuron=0)
    with pytest.raises(ValueError, match="2 entries"):
        result.select(head=2)
    pytest.importorskip("matplotlib")
    from nnterp.toolkit import plot_sweep

    with pytest.raises(ValueError, match=r"plot_sweep\(sweep.select\(head=0\)\)"):
        plot_sweep(result)
    plot_sweep(one)  # a selected head draws
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(InvalidArgument, match=r"patch_heads_by_position\(positions=\[99\]\)"):
            patch_heads_by_position(model, pair.clean, pair.corrupted, pair.metric(model), positions=[99], progress=False)
        with pytest.raises(InvalidArgument, match=r"patch_heads_by_position\(heads=\[4\]\)"):
            patch_heads_by_position(model, pair.clean, pair.corrupted, pair.metric(model), heads=[4], progress=False)
    finally:
        hook.remove()
    assert not calls
