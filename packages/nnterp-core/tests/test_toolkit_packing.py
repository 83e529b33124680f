"""Packed patching sweeps: many cells to a forward, each cell's value exactly what one trace of that cell alone gives."""

import contextlib

import pytest
from nnterp import InvalidArgument
import torch
from nnterp.tolerances import tolerance
from nnterp.toolkit.packing import estimate_row_bytes
from nnterp.toolkit.patching import patch_attention_output, patch_heads, patch_mlp_output, patch_residual

# a dense pre-norm, GPT-2, a parallel block, a sandwich, a mixture of experts, a per-layer-input block, a recurrent one,
# a parallel block with ALiBi, several residual streams: every family the toolkit's tests use and more
FAMILIES = ["llama", "gpt2", "gptj", "gemma2", "mixtral", "qwen3", "gemma4_text", "mamba", "falcon", "deepseek_v4"]
CLEAN = "Mary and John met. J gave it to"
CORRUPTED = "Mary and John met. M gave it to"


def metric_for(model):
    tokenizer = model.tokenizer
    j, m = tokenizer("J")["input_ids"][-1], tokenizer("M")["input_ids"][-1]
    return lambda logits: (logits[:, -1, j] - logits[:, -1, m]).mean()


def write_position(patched, source, position):
    patched[:, position] = source[:, position]


def write_head(patched, source, head):
    patched[:, :, head] = source[:, :, head]


#: families whose kernels round a row differently in a larger batch (two mixtures, whose experts' matmuls take a batch-dependent share of
#: the tokens; Gemma 4's and Mamba's CPU kernels block by the batch): a cell's value there matches its own trace within
#: float32 rounding, as the same prompt run alone and repeated does (test_the_rounding_is_the_batch_s_not_the_packing_s)
BATCH_DEPENDENT = {"mixtral", "deepseek_v4", "gemma4_text", "mamba"}


SWEEPS = {
    "residual": (patch_residual, "layer_input", write_position),
    "attention": (patch_attention_output, "self_attn.attention_output", write_position),
    "mlp": (patch_mlp_output, "mlp.mlp_output", write_position),
    "heads": (patch_heads, "self_attn.attention_head_outputs", write_head),
}


def owner_of(model, layer, site):
    where, _, name = site.rpartition(".")
    envoy = model.layers[layer]
    for part in filter(None, where.split(".")):
        envoy = getattr(envoy, part)
    return envoy, name


def one_trace_per_cell(model, clean, corrupted, site, write, layer, columns):
    """The metric of each cell by a trace of its own: the clean value read, written into the corrupted run at one column."""
    metric = metric_for(model)
    owner, name = owner_of(model, layer, site)
    saved = []
    with torch.no_grad(), model.trace(clean):
        saved.append(getattr(owner, name).clone())
    out = []
    for column in columns:
        with torch.no_grad(), model.trace(corrupted):
            patched = getattr(owner, name).clone()
            write(patched, saved[0], column)
            setattr(owner, name, patched)
            out.append(float(metric(model.logits)))
    return out


def applicable(model, site):
    reasons = model.support().get(site.rpartition(".")[2] if site.startswith("self_attn") else site)
    return reasons is None or len(reasons) < model.num_layers


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("kind", SWEEPS)
def test_a_packed_sweep_equals_one_trace_per_cell(tiny_model, name, kind):
    model = tiny_model(name)
    sweep, site, write = SWEEPS[kind]
    try:
        result = sweep(model, CLEAN, CORRUPTED, metric_for(model), progress=False)
    except Exception as error:  # a family without the value says so by name; nothing else may go wrong
        from nnterp import Unavailable

        assert isinstance(error, Unavailable), error
        pytest.skip(f"{name} serves no {site}: {error}")
    layers = model.num_layers
    # one forward per layer: every column of a layer in one pack
    assert result.forwards == layers
    for layer in range(layers):
        count = int((~result.values[layer].isnan()).sum())
        expected = one_trace_per_cell(model, CLEAN, CORRUPTED, site, write, layer, range(count))
        packed = result.values[layer, :count]
        if name in BATCH_DEPENDENT:
            torch.testing.assert_close(packed, torch.tensor(expected), rtol=0, atol=tolerance(torch.float32))
        else:
            assert packed.tolist() == expected, f"{name} layer {layer}: packed {packed.tolist()} against {expected}"


@pytest.mark.parametrize("name", ["llama", "gemma2"])
def test_a_batch_of_prompts_packs_cells_times_prompts(tiny_model, name):
    model = tiny_model(name)
    clean, corrupted = [CLEAN, "Hi there J"], [CORRUPTED, "Hi there M"]
    layers = [0, model.num_layers - 1]
    result = patch_residual(model, clean, corrupted, metric_for(model), layers=layers, progress=False)
    assert result.forwards == 2
    for row, layer in enumerate(layers):
        expected = one_trace_per_cell(model, clean, corrupted, "layer_input", write_position, layer, range(result.values.shape[1]))
        assert result.values[row].tolist() == expected


@contextlib.contextmanager
def block_runs(model):
    """Count the runs of each block's forward while open (a skipped block is called but its forward, and so its MLP, never runs)."""
    with torch.no_grad(), model.trace(CLEAN):  # the first trace loads the weights, replacing the meta modules
        pass
    counts = [0] * model.num_layers
    mlps = [model.layers[i].mlp._module for i in range(model.num_layers)]
    handles = [mlp.register_forward_pre_hook(lambda *_, i=i: counts.__setitem__(i, counts[i] + 1)) for i, mlp in enumerate(mlps)]
    try:
        yield counts
    finally:
        for handle in handles:
            handle.remove()


def test_a_pack_skips_the_blocks_before_its_layer(tiny_model):
    model = tiny_model("llama")
    with block_runs(model) as counts:
        result = patch_heads(model, CLEAN, CORRUPTED, metric_for(model), progress=False)
    layers = model.num_layers
    assert result.forwards == layers
    # the clean and the corrupted run reach every block; the pack of layer i runs blocks i and after
    assert counts == [2 + (block + 1) for block in range(layers)]


def test_a_block_read_beside_the_stream_is_not_skipped(tiny_model):
    model = tiny_model("gemma4_text")
    assert any(model.layers[i].read_beside_the_stream() for i in range(model.num_layers))
    with block_runs(model) as counts:
        result = patch_residual(model, CLEAN, CORRUPTED, metric_for(model), positions=[-1], progress=False)
    assert result.forwards == model.num_layers
    assert counts == [2 + model.num_layers] * model.num_layers


def test_cells_per_forward_and_the_budget_set_the_packs(tiny_model):
    model = tiny_model("llama")
    metric = metric_for(model)
    heads = model.layers[0].self_attn.num_heads
    packed = patch_heads(model, CLEAN, CORRUPTED, metric, progress=False)
    one_each = patch_heads(model, CLEAN, CORRUPTED, metric, cells_per_forward=1, progress=False)
    assert one_each.forwards == model.num_layers * heads
    assert torch.equal(one_each.values, packed.values)
    seq = len(model.tokenizer(CLEAN)["input_ids"])
    cell = estimate_row_bytes(model, seq)
    two = patch_heads(model, CLEAN, CORRUPTED, metric, memory_budget=2 * cell + 1, progress=False)
    assert two.forwards == model.num_layers * -(-heads // 2)
    assert torch.equal(two.values, packed.values)


def test_what_the_budget_cannot_hold_is_refused_before_the_model_runs(tiny_model):
    model = tiny_model("llama")
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    seq = len(model.tokenizer(CLEAN)["input_ids"])
    cell = estimate_row_bytes(model, seq)
    try:
        with pytest.raises(MemoryError, match=r"one patching cell .* estimated at .* [kM]B, over the memory budget"):
            patch_residual(model, CLEAN, CORRUPTED, metric_for(model), memory_budget=cell - 1, progress=False)
        with pytest.raises(MemoryError, match=r"cells_per_forward=3 is estimated at .* which holds 2: pass cells_per_forward=2"):
            patch_heads(model, CLEAN, CORRUPTED, metric_for(model), cells_per_forward=3, memory_budget=2 * cell, progress=False)
        with pytest.raises(ValueError, match="cells_per_forward must be a positive int"):
            patch_heads(model, CLEAN, CORRUPTED, metric_for(model), cells_per_forward=0, progress=False)
        with pytest.raises(ValueError, match="memory_budget is a number of bytes"):
            patch_heads(model, CLEAN, CORRUPTED, metric_for(model), memory_budget="2GB", progress=False)
    finally:
        hook.remove()
    assert not calls


def test_the_estimate_grows_with_the_prompt_and_the_vocabulary(tiny_model):
    model = tiny_model("llama")
    short, long = estimate_row_bytes(model, 8), estimate_row_bytes(model, 16)
    assert long > 2 * short - 1
    # the logits alone, twice over (the metric's copy), are a floor
    assert short >= 2 * 8 * model.vocab_size * 4


def test_a_remote_sweep_sends_one_request_a_pack(tiny_model):
    model = tiny_model("llama")
    local = patch_heads(model, CLEAN, CORRUPTED, metric_for(model), progress=False)
    remote = patch_heads(model, CLEAN, CORRUPTED, metric_for(model), progress=False, remote="local")
    assert remote.forwards == local.forwards == model.num_layers
    assert torch.equal(remote.values, local.values)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_rounding_is_the_batch_s_not_the_packing_s(tiny_model, name):
    # the prompt alone against the same prompt repeated in one batch, no patch at all: bitwise equal exactly on the
    # families whose packed cells are bitwise equal to their own traces
    model = tiny_model(name)
    metric = metric_for(model)
    alone, repeated = [], []
    with torch.no_grad(), model.trace(CORRUPTED):
        alone.append(float(metric(model.logits)))
    with torch.no_grad(), model.trace([CORRUPTED] * 5):
        logits = model.logits
        repeated.extend(float(metric(logits[copy : copy + 1])) for copy in range(5))
    if name in BATCH_DEPENDENT:
        assert max(abs(value - alone[0]) for value in repeated) <= tolerance(torch.float32)
    else:
        assert repeated == alone * 5


@pytest.mark.parametrize("name", ["llama", "gpt2", "gemma2"])
def test_logits_at_the_last_position_gives_the_same_sweep(tiny_model, name):
    model = tiny_model(name)
    metric = metric_for(model)
    full = patch_heads(model, CLEAN, CORRUPTED, metric, progress=False)
    last = patch_heads(model, CLEAN, CORRUPTED, metric, logits_at=[-1], progress=False)
    # a pack's logits at one position are still a matrix product over its copies: the same bits as the full logits there
    assert torch.equal(last.values, full.values)
    assert (last.metric_clean, last.metric_corrupted) == (full.metric_clean, full.metric_corrupted)
    seen = []
    patch_residual(model, CLEAN, CORRUPTED, lambda logits: seen.append(tuple(logits.shape)) or logits[:, -1, 0].mean(), layers=[0], positions=[-1], logits_at=[-2, -1], progress=False)
    assert {shape[1] for shape in seen} == {2}


def test_logits_at_is_checked_before_the_model_runs(tiny_model):
    model = tiny_model("llama")
    calls = []
    hook = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(InvalidArgument, match=r"logits_at=\[99\]"):
            patch_heads(model, CLEAN, CORRUPTED, metric_for(model), logits_at=[99], progress=False)
        with pytest.raises(ValueError, match="distinct and in order"):
            patch_heads(model, CLEAN, CORRUPTED, metric_for(model), logits_at=[-1, -2], progress=False)
    finally:
        hook.remove()
    assert not calls


@pytest.mark.parametrize("name", ["hy_v4", "glm_moe_dsa"])
def test_a_block_handing_on_a_state_beside_the_stream_is_not_skipped(tiny_model, name):
    # HY-V4's blocks return (streams, top-k selection), which a later shared DSA layer reuses: skipped from block 0 they
    # would hand on nothing, and the model raises
    model = tiny_model(name)
    assert all(model.layers[i].carries() for i in range(model.num_layers))
    with block_runs(model) as counts:
        result = patch_residual(model, CLEAN, CORRUPTED, metric_for(model), positions=[-1], progress=False)
    assert counts == [2 + model.num_layers] * model.num_layers
    for layer in range(model.num_layers):
        expected = one_trace_per_cell(model, CLEAN, CORRUPTED, "layer_input", write_position, layer, [-1])
        torch.testing.assert_close(result.values[layer], torch.tensor(expected), rtol=0, atol=tolerance(torch.float32))


def test_the_estimate_reads_sizes_that_vary_by_layer(tiny_model):
    # dots3's config refuses a global num_attention_heads (it varies by layer): the estimate takes the largest
    model = tiny_model("dots3_note_text")
    heads = max(layer.num_attention_heads for layer in model.text_config.per_layer_config)
    assert estimate_row_bytes(model, 8) >= 8 * 2 * heads * 8 * 4
