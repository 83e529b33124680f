"""Ablations against the same edit made with plain torch hooks on the HuggingFace modules, the exact cases, and the sweeps.

On llama (pre-norm), gemma2 (sandwich: the contributions are the post norms'
outputs) and mixtral (a mixture of experts, whose experts are ablated).
"""

import pytest
import torch
from nnterp import InvalidArgument, Unavailable
from nnterp.errors import ToolkitInsideTrace
from nnterp.toolkit._arguments import loaded
from nnterp.toolkit.ablation import Ablation, ablation_sweep

FAMILIES = ["llama", "gemma2", "mixtral"]
LENGTH = 7
#: the ablated prompt, a same-length reference (resample, position_mean) and a shorter one (mean: padding left out)
PROMPT = [5, 9, 13, 17, 21, 25, 29]
SAME = [[31, 8, 44, 12, 3, 50, 6], [7, 7, 40, 2, 19, 33, 11]]
UNEVEN = [[31, 8, 44, 12, 3, 50, 6], [7, 40, 2, 19]]
HOWS = ["zero", "mean", "position_mean", "resample"]
ATOL = 1e-5


def kinds(family):
    return ["head", "attention", "mlp", "expert"] if family == "mixtral" else ["head", "neuron", "attention", "mlp"]


def site_of(kind):
    """The Ablation keyword ablating one site of ``kind``, and the (layer, columns) the hooks edit."""
    return {
        "head": ({"heads": [(1, 2)]}, (1, [2])),
        "neuron": ({"neurons": [(0, [3, 7])]}, (0, [3, 7])),
        "attention": ({"attention": [0]}, (0, None)),
        "mlp": ({"mlp": [1]}, (1, None)),
        "expert": ({"experts": [(1, 2)]}, (1, [2])),
    }[kind]


def reference_of(how):
    return {"zero": None, "mean": UNEVEN, "position_mean": SAME, "resample": SAME[:1]}[how]


# -- the direct computation: plain hooks on the HF modules ----------------------------------


def hf_block(model, layer):
    return model._module.model.layers[layer]


def location(model, family, kind, layer):
    """``(module, "input" | "output")`` where the hooks read and write the site's value."""
    block = hf_block(model, layer)
    if kind == "head":
        return block.self_attn.o_proj, "input"
    if kind == "neuron":
        return block.mlp.down_proj, "input"
    if kind == "attention":
        return (block.post_attention_layernorm if family == "gemma2" else block.self_attn), "output"
    return (block.post_feedforward_layernorm if family == "gemma2" else block.mlp), "output"


def forward(model, ids, hooks=()):
    """The HF model's logits for ``ids`` (``[batch, seq]``, no padding) with ``hooks`` registered: ``(module, kind, fn)``."""
    loaded(model)  # nnsight loads the weights at the first trace
    handles = []
    for module, where, fn in hooks:
        if where == "input":
            handles.append(module.register_forward_pre_hook(fn, with_kwargs=True))
        else:
            handles.append(module.register_forward_hook(fn))
    try:
        with torch.no_grad():
            return model._module(input_ids=torch.as_tensor(ids)).logits.float()
    finally:
        for handle in handles:
            handle.remove()


def first(output):
    return output[0] if isinstance(output, tuple) else output


def capture(model, family, kind, layer, prompts):
    """The site's value on each of ``prompts`` run alone (unpadded), one tensor per prompt: ``[seq, ...]``."""
    module, where = location(model, family, kind, layer)
    out = []

    def grab(module, *args):
        value = args[0][0] if where == "input" else first(args[-1])
        out.append(value.detach().clone()[0])

    for prompt in prompts:
        handle = module.register_forward_pre_hook(grab) if where == "input" else module.register_forward_hook(grab)
        try:
            forward(model, [prompt])
        finally:
            handle.remove()
    return out


def expert_share(experts, hidden, indices, weights, expert):
    """Expert ``expert``'s weighted output, computed by running the experts module with every other slot's weight zero."""
    return experts.forward(hidden, indices, weights * (indices == expert).to(weights.dtype))  # forward: no hooks again


def capture_expert(model, layer, expert, prompts):
    experts, out = hf_block(model, layer).mlp.experts, []

    def grab(module, args, kwargs):
        hidden, indices, weights = args
        out.append(expert_share(module, hidden, indices, weights, expert).detach().clone())

    for prompt in prompts:
        handle = experts.register_forward_pre_hook(grab, with_kwargs=True)
        try:
            forward(model, [prompt])
        finally:
            handle.remove()
    return out


def replacement(values, how):
    """What the site is replaced by, from the per-prompt values captured on the reference prompts."""
    if how == "mean":
        return torch.cat(values).mean(0)  # every real token of every prompt
    if how == "position_mean":
        return torch.stack(values).mean(0)
    return values[0]  # resample from the one reference prompt


def hooked(model, family, kind, how, prompt=PROMPT, renormalize=False):
    """The logits of ``prompt`` with the site ablated by plain hooks."""
    _, (layer, columns) = site_of(kind)
    reference = reference_of(how)
    if kind == "expert":
        experts = hf_block(model, layer).mlp.experts
        (expert,) = columns
        if how == "zero":

            def zero_weight(module, args, kwargs):
                hidden, indices, weights = args
                kept = weights.masked_fill(indices == expert, 0)
                if renormalize:
                    kept = kept * (weights.sum(-1, keepdim=True) / kept.sum(-1, keepdim=True))
                return (hidden, indices, kept), kwargs

            return forward(model, [prompt], [(experts, "input", zero_weight)])
        new = replacement(capture_expert(model, layer, expert, reference), how)
        seen = {}

        def keep_args(module, args, kwargs):
            seen["args"] = args

        def swap_share(module, args, output):
            hidden, indices, weights = seen["args"]
            return output - expert_share(module, hidden, indices, weights, expert) + new

        return forward(model, [prompt], [(experts, "input", keep_args), (experts, "output", swap_share)])

    module, where = location(model, family, kind, layer)
    if how == "zero":
        new = None
    else:
        new = replacement(capture(model, family, kind, layer, reference), how)

    def edit(value):
        value = value.clone()
        if kind == "head":
            width = model.layers[layer].self_attn.head_dim
            for head in columns:
                span = slice(head * width, (head + 1) * width)
                value[..., span] = 0 if new is None else new[..., span]
        elif kind == "neuron":
            value[..., columns] = 0 if new is None else new[..., columns]
        else:
            value[...] = 0 if new is None else new
        return value

    if where == "input":

        def on_input(module, args, kwargs):
            return (edit(args[0]), *args[1:]), kwargs

        return forward(model, [prompt], [(module, "input", on_input)])

    def on_output(module, args, output):
        if isinstance(output, tuple):
            return (edit(output[0]), *output[1:])
        return edit(output)

    return forward(model, [prompt], [(module, "output", on_output)])


def ablated(model, ablation, prompt=PROMPT):
    out = []
    with torch.no_grad(), model.trace([prompt]):
        ablation.apply()
        out.append(model.logits.float().save())
    return out[0]


# -- against the hooks ---------------------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("family", FAMILIES)
def test_each_kind_matches_the_same_edit_made_with_plain_hooks(tiny_model, family, how):
    model = tiny_model(family)
    clean = forward(model, [PROMPT])
    for kind in kinds(family):
        keywords, _ = site_of(kind)
        ablation = Ablation(model, how=how, reference=reference_of(how), **keywords)
        result = ablated(model, ablation)
        expected = hooked(model, family, kind, how)
        torch.testing.assert_close(result, expected, atol=ATOL, rtol=1e-4, msg=f"{kind}, {how}")
        assert (result - clean).abs().max() > 1e-4, f"ablating the {kind} by {how} changed nothing"


def test_renormalized_expert_zeroing_matches_the_hooks(tiny_model):
    model = tiny_model("mixtral")
    ablation = Ablation(model, experts=[(1, 2)], renormalize=True)
    result = ablated(model, ablation)
    torch.testing.assert_close(result, hooked(model, "mixtral", "expert", "zero", renormalize=True), atol=ATOL, rtol=1e-4)
    plain = ablated(model, Ablation(model, experts=[(1, 2)]))
    assert (result - plain).abs().max() > 1e-4


# -- the exact cases -----------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_resampling_from_the_same_prompt_changes_nothing(tiny_model, family):
    model = tiny_model(family)
    clean = forward(model, [PROMPT])
    sites = {"heads": [(0, slice(None)), (1, [0, 3])], "attention": [1], "mlp": [0]}
    sites.update({"experts": [(0, [0, 1, 2, 3])]} if family == "mixtral" else {"neurons": [(1, slice(None))]})
    result = ablated(model, Ablation(model, how="resample", reference=[PROMPT], **sites))
    torch.testing.assert_close(result, clean, atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_position_mean_of_one_prompt_is_resampling_from_it(tiny_model, family):
    model = tiny_model(family)
    sites = {"heads": [(1, 1)], "mlp": [0], **({"experts": [(1, 0)]} if family == "mixtral" else {"neurons": [(0, [1, 2])]})}
    resampled = ablated(model, Ablation(model, how="resample", reference=SAME[1], **sites))
    for reference in ([SAME[1]], [SAME[1], SAME[1]]):
        mean = ablated(model, Ablation(model, how="position_mean", reference=reference, **sites))
        torch.testing.assert_close(mean, resampled, atol=ATOL, rtol=1e-4)


def test_zeroing_an_expert_no_token_runs_changes_nothing(tiny_model):
    model = tiny_model("mixtral")
    prompt = PROMPT[:1]  # one token: top_k of the experts run, the rest none
    with torch.no_grad(), model.trace([prompt]):
        chosen = model.layers[1].mlp.expert_indices.save()
    unused = sorted(set(range(model.layers[1].mlp.num_experts)) - set(chosen.flatten().tolist()))
    assert unused
    clean = forward(model, [prompt])
    result = ablated(model, Ablation(model, experts=[(1, unused)], renormalize=True), prompt)
    torch.testing.assert_close(result, clean, atol=0, rtol=0)
    used = ablated(model, Ablation(model, experts=[(1, chosen.flatten().tolist()[0])]), prompt)
    assert (used - clean).abs().max() > 1e-4


def test_resampling_a_batch_takes_each_prompt_from_its_own_reference(tiny_model):
    model = tiny_model("llama")
    ablation = Ablation(model, attention=[0], how="resample", reference=SAME)
    out = []
    with torch.no_grad(), model.trace([PROMPT, PROMPT]):
        ablation.apply()
        out.append(model.logits.save())
    for row, reference in enumerate(SAME):
        alone = ablated(model, Ablation(model, attention=[0], how="resample", reference=[reference]))
        torch.testing.assert_close(out[0][row : row + 1], alone, atol=ATOL, rtol=1e-4)


# -- sweeps ----------------------------------------------------------------------------------


def metric_for(model):
    return lambda logits: (logits[:, -1, 5] - logits[:, -1, 7]).mean()


def metric_of(model, ablation, prompts):
    out = []
    with torch.no_grad(), model.trace(prompts):
        if ablation is not None:
            ablation.apply()
        out.append(metric_for(model)(model.logits))
    return float(out[0])


@pytest.mark.parametrize("family", FAMILIES)
def test_each_sweep_cell_is_that_site_ablated_alone(tiny_model, family):
    model = tiny_model(family)
    prompts = [PROMPT, SAME[0]]
    metric = metric_for(model)
    over = "experts" if family == "mixtral" else "neurons"
    cases = [
        ("heads", {"how": "mean", "reference": UNEVEN}, lambda layer, column: {"heads": [(layer, column)]}),
        ("sublayers", {}, lambda layer, column: {["attention", "mlp"][column]: [layer]}),
        (over, {"how": "resample", "reference": [SAME[1], PROMPT]}, None),
    ]
    for swept, options, keywords in cases:
        if swept == "neurons":
            options = {**options, "indices": [0, 1, 2, 9], "group_size": 2}
            keywords = lambda layer, column: {"neurons": [(layer, [[0, 1], [2, 9]][column])]}  # noqa: E731
        elif swept == "experts":
            keywords = lambda layer, column: {"experts": [(layer, column)]}  # noqa: E731
        sweep = ablation_sweep(model, prompts, metric, swept, progress=False, **options)
        rows, columns = sweep.values.shape
        assert sweep.axes[0] == "layer" and rows == model.num_layers
        assert sweep.metric_clean == pytest.approx(metric_of(model, None, prompts), abs=1e-4)
        every = {}
        for layer in range(rows):
            for column in range(columns):
                for key, value in keywords(layer, column).items():
                    every.setdefault(key, []).extend(value)
                alone = Ablation(model, how=options.get("how", "zero"), reference=options.get("reference"), **keywords(layer, column))
                assert sweep.values[layer, column].item() == pytest.approx(metric_of(model, alone, prompts), abs=1e-4), (swept, layer, column)
        together = Ablation(model, how=options.get("how", "zero"), reference=options.get("reference"), **every)
        assert sweep.metric_corrupted == pytest.approx(metric_of(model, together, prompts), abs=1e-4)


def test_sweep_labels_and_packing(tiny_model):
    model = tiny_model("llama")
    metric = metric_for(model)
    packed = ablation_sweep(model, PROMPT, metric, "neurons", layers=[0, -1], indices=[0, 1, 2, 5], group_size=3, progress=False)
    assert packed.axes == ("layer", "neuron")
    assert packed.labels == {"layer": ["0", str(model.num_layers - 1)], "neuron": ["0-2", "5"]}
    assert packed.forwards == 2
    single = ablation_sweep(model, PROMPT, metric, "neurons", layers=[0, -1], indices=[0, 1, 2, 5], group_size=3, progress=False, cells_per_forward=1)
    assert single.forwards == 4
    torch.testing.assert_close(single.values, packed.values, atol=1e-5, rtol=0)
    heads = ablation_sweep(model, PROMPT, metric, "heads", progress=False)
    assert heads.labels["head"] == [str(h) for h in range(model.num_heads)]
    last = ablation_sweep(model, PROMPT, metric, "heads", progress=False, logits_at=[-1], layers=[1])
    torch.testing.assert_close(last.values, heads.values[1:2], atol=1e-4, rtol=0)


# -- arguments ---------------------------------------------------------------------------------


def test_bad_arguments_are_refused_before_anything_runs(tiny_model):
    model = tiny_model("llama")
    calls = []
    handle = model._module.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(InvalidArgument, match="how="):
            Ablation(model, heads=[(0, 1)], how="average")
        with pytest.raises(InvalidArgument, match="reference"):
            Ablation(model, heads=[(0, 1)], how="mean")
        with pytest.raises(InvalidArgument, match="reads no reference"):
            Ablation(model, heads=[(0, 1)], reference=SAME)
        with pytest.raises(InvalidArgument, match="no site"):
            Ablation(model)
        with pytest.raises(InvalidArgument, match=r"heads=.*4 attention heads"):
            Ablation(model, heads=[(0, model.num_heads)])
        with pytest.raises(InvalidArgument, match="heads="):
            Ablation(model, heads=[0, 1])
        with pytest.raises(InvalidArgument, match=r"attention=.*blocks"):
            Ablation(model, attention=[model.num_layers])
        with pytest.raises(InvalidArgument, match="renormalize"):
            Ablation(model, heads=[(0, 1)], renormalize=True)
        with pytest.raises(InvalidArgument, match="same number of tokens"):
            Ablation(model, mlp=[0], how="position_mean", reference=UNEVEN)
        with pytest.raises(Unavailable, match="expert"):
            Ablation(model, experts=[(0, 1)])
        with pytest.raises(InvalidArgument, match="over="):
            ablation_sweep(model, PROMPT, metric_for(model), "layers", progress=False)
        with pytest.raises(InvalidArgument, match="group_size"):
            ablation_sweep(model, PROMPT, metric_for(model), "heads", group_size=2, progress=False)
        with pytest.raises(ToolkitInsideTrace):
            Ablation(model, heads=[(0, 1)]).apply()
    finally:
        handle.remove()
    assert not calls
    # the reference runs once, then the sweep refuses its length before any forward of its own
    with pytest.raises(InvalidArgument, match="positions"):
        ablation_sweep(model, PROMPT[:5], metric_for(model), "heads", how="resample", reference=SAME[:1], progress=False)
    with pytest.raises(InvalidArgument, match="one per prompt"):
        ablation_sweep(model, [PROMPT] * 3, metric_for(model), "heads", how="resample", reference=SAME, progress=False)


def test_neurons_of_a_mixture_are_unavailable_and_apply_checks_the_run(tiny_model):
    mixtral = tiny_model("mixtral")
    with pytest.raises(Unavailable, match="mixture of experts"):
        Ablation(mixtral, neurons=[(0, 1)])
    model = tiny_model("llama")
    ablation = Ablation(model, mlp=[0], how="resample", reference=SAME[:1])
    with pytest.raises(InvalidArgument, match="same number of tokens"):
        with torch.no_grad(), model.trace([PROMPT[:4]]):
            ablation.apply()
