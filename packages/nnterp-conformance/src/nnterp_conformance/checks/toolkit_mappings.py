"""The toolkit's mappings, proven on the checkpoint: TransformerLens's hook names and the cache's groups.

``nnterp.toolkit.names.HOOKS`` says which standard value holds each TransformerLens hook's tensor, and
``cache_values`` reads a hook by its name in TransformerLens's layout. ``toolkit_names_read_their_values`` reads, in
one ``cache_values`` forward, every hook the table maps on this checkpoint and the standard value each names, holds
the hook to that value laid out as TransformerLens lays the hook out (axes this module names apart from the table), and
holds the hooks to the identities TransformerLens's own satisfy. ``toolkit_groups_sum_to_the_stream`` holds the
cache's ``layers.*.contributions`` group and ``decompose_resid`` to the stream they decompose.
"""

from __future__ import annotations

from typing import Any

from nnterp import Unavailable, layouts
from nnterp.identities import (
    CONTRIBUTION,
    HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES,
    MID_STREAM,
    PATTERN_IS_SOFTMAX_OF_SCORES,
    STREAM_CONTINUITY,
    Identity,
    IdentityMismatch,
    heads_from_pattern,
    softmax_pattern,
    stream_sum,
)
from nnterp.protocols import StandardModel
from nnterp.tolerances import coarsest

import torch

from .base import (
    Case,
    CheckFailure,
    Gaps,
    Skip,
    check,
    expect_close,
    expect_holds,
    single_stream,
)

#: TransformerLens's axis names and the standard axes each may be (a query or key-value head, a value or query width)
AXES: dict[str, tuple[str, ...]] = {
    "batch": (layouts.BATCH,),
    "pos": (layouts.SEQ,),
    "query_pos": (layouts.QUERY,),
    "key_pos": (layouts.KEY,),
    "head_index": (layouts.HEADS, layouts.KV_HEADS),
    "d_head": (layouts.HEAD_DIM, layouts.QK_HEAD_DIM),
    "d_model": (layouts.HIDDEN,),
    "d_mlp": (layouts.INTERMEDIATE,),
    "d_vocab": (layouts.VOCAB,),
}

_STREAM = ("batch", "pos", "d_model")
_PER_HEAD = ("batch", "pos", "head_index", "d_head")
_PATTERN = ("batch", "head_index", "query_pos", "key_pos")

#: how TransformerLens lays out each hook the table may map (block hooks block-relative), as HookedTransformer documents
#: them; written here, not read off the table, so a layout the table gets wrong shows
TRANSFORMER_LENS_LAYOUTS: dict[str, tuple[str, ...]] = {
    "hook_resid_pre": _STREAM,
    "attn.hook_q": _PER_HEAD,
    "attn.hook_k": _PER_HEAD,
    "attn.hook_v": _PER_HEAD,
    "attn.hook_rot_q": _PER_HEAD,
    "attn.hook_rot_k": _PER_HEAD,
    "attn.hook_attn_scores": _PATTERN,
    "attn.hook_pattern": _PATTERN,
    "attn.hook_z": _PER_HEAD,
    "hook_attn_out": _STREAM,
    "hook_resid_mid": _STREAM,
    "hook_mlp_in": _STREAM,
    "mlp.hook_post": ("batch", "pos", "d_mlp"),
    "hook_mlp_out": _STREAM,
    "hook_resid_post": _STREAM,
    "hook_embed": _STREAM,
    "hook_unembed": ("batch", "pos", "d_vocab"),
}


def mapped_hooks(model: StandardModel, first: bool = False) -> dict[str, str]:
    """Every TransformerLens name (one per block) the table maps to a value this checkpoint serves -> that standard name.

    Asked of ``standard_name`` and ``expand_names``, as ``cache_values`` asks them; a hook no standard value holds here
    (``NoStandardValue``), or whose value the checkpoint lacks, is left out. ``first``: the first one found only.
    """
    from nnterp.toolkit.cache import expand_names
    from nnterp.toolkit.names import HOOKS, standard_name

    found: dict[str, str] = {}
    for hook in HOOKS:
        names = [f"blocks.{index}.{hook.name}" for index in range(model.num_layers)] if hook.in_block else [hook.name]
        for name in names:
            try:
                standard = standard_name(model, name)
                expand_names(model, [standard])
            except (Unavailable, KeyError):
                continue
            found[name] = standard
            if first:
                return found
    return found


def has_mapped_hooks(model: StandardModel) -> bool:
    """Whether the table maps any TransformerLens hook to a value this model serves."""
    return bool(mapped_hooks(model, first=True))


def _relative(name: str) -> str:
    """``blocks.3.attn.hook_q`` -> ``attn.hook_q``; a model hook as it is."""
    return name.split(".", 2)[2] if name.startswith("blocks.") else name


def _dims(model: StandardModel, standard: str) -> tuple[str, ...] | None:
    """The axis names of the standard value ``standard`` (a full name) as its component declares them."""
    from nnterp.toolkit.cache import _host

    host, value = _host(model, standard)
    return getattr(type(host), value).dims


def to_transformer_lens(name: str, dims: tuple[str, ...] | None, value: torch.Tensor, standard: str) -> torch.Tensor:
    """``value`` (the standard value ``standard``, axes ``dims``) permuted into TransformerLens's layout of hook ``name``.

    Each TransformerLens axis is matched by name to the standard axis it is (``AXES``); a standard value with an axis
    TransformerLens's hook lacks, or lacking one it has, is no such hook.
    """
    wanted = TRANSFORMER_LENS_LAYOUTS.get(_relative(name))
    if wanted is None:
        raise CheckFailure(
            f"{name}: the table maps a hook whose TransformerLens layout the kit does not know ({standard})"
        )
    if dims is None:
        raise CheckFailure(f"{name}: {standard} declares no layout, so no TransformerLens layout follows from it")
    order = []
    for axis in wanted:
        matches = [index for index, dim in enumerate(dims) if dim in AXES[axis] and index not in order]
        if not matches:
            raise CheckFailure(
                f"{name}: {standard} is laid out [{', '.join(dims)}], which has no {axis} axis of TransformerLens's [{', '.join(wanted)}]"
            )
        order.append(matches[0])
    extra = [dims[index] for index in range(len(dims)) if index not in order]
    if extra:
        raise CheckFailure(
            f"{name}: {standard} is laid out [{', '.join(dims)}]: its {', '.join(extra)} axis has no place in TransformerLens's [{', '.join(wanted)}]"
        )
    return value.permute(order)


def _is_parallel(block: Any) -> bool:
    """Whether the block's declarations say its sublayers read one stream (``layer_mid`` unavailable as ``PARALLEL``)."""
    from nnterp.reasons import PARALLEL

    value = type(block).values().get("layer_mid")
    return value is not None and value.reason(block) is PARALLEL


def _terms(block: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The block's declared ``(mid_terms(), contributions())``: what it adds before its mid stream, and in all."""
    contributions = getattr(block, "contributions", None)
    mid = getattr(block, "mid_terms", None)
    return (tuple(mid()) if mid is not None else ()), (tuple(contributions()) if contributions is not None else ())


ATTENTION, MLP = "self_attn.attention_output", "mlp.mlp_output"


@check("toolkit", applies=has_mapped_hooks, drawn=False)
def toolkit_names_read_their_values(model: StandardModel, case: Case) -> str:
    """Every TransformerLens hook the table maps reads, through cache_values, its standard value in TransformerLens's layout, and the hooks satisfy TransformerLens's identities (resid_pre + attn_out == resid_mid, resid_mid + mlp_out == resid_post, z == pattern @ v, softmax(attn_scores) == pattern, mlp_in == resid_mid)."""
    from nnterp.toolkit import cache_values

    hooks = mapped_hooks(model)
    if not all(isinstance(prompt, str) for prompt in case.prompts):
        raise Skip("needs text prompts: cache_values tokenizes them")
    standards = sorted(set(hooks.values()))
    # one forward: each hook by its name, in TransformerLens's layout, and each standard value it names by the standard
    # name, in the standard layout
    cache = cache_values(model, case.batch, [*hooks, *standards], batch_size=len(case.prompts), progress=False)
    read = {standard: cache[standard] for standard in standards}
    gaps = Gaps()
    for name, standard in hooks.items():
        served = cache[name]
        expected = to_transformer_lens(name, _dims(model, standard), read[standard], standard)
        if served.shape != expected.shape:
            raise CheckFailure(
                f"{name}: cache_values reads {tuple(served.shape)}, {standard} in TransformerLens's layout "
                f"[{', '.join(TRANSFORMER_LENS_LAYOUTS[_relative(name)])}] is {tuple(expected.shape)}"
            )
        gaps.add(expect_close(f"{name} against {standard}, the value the table names", served, expected))
    skipped: dict[str, str] = {}
    for layer in range(model.num_layers):
        _identities(model, layer, hooks, cache, gaps, skipped)
    notes = "; ".join(f"{what}: {why}" for what, why in skipped.items())
    return f"{len(hooks)} hooks, {gaps}" + (f" (not held: {notes})" if notes else "")


def _identities(
    model: StandardModel, layer: int, hooks: dict[str, str], cache: Any, gaps: Gaps, skipped: dict[str, str]
) -> None:
    """TransformerLens's identities among block ``layer``'s hooks, each where the block's declarations say it holds;
    ``skipped`` collects, per identity, why a block does not hold it."""
    block = model.layers[layer]

    def has(*names: str) -> bool:
        return all(f"blocks.{layer}.{name}" in hooks for name in names)

    def get(name: str) -> torch.Tensor:
        return cache[f"blocks.{layer}.{name}"]

    def close(what: str, actual: torch.Tensor, wanted: torch.Tensor, *parts: torch.Tensor) -> None:
        gaps.add(
            expect_close(
                f"blocks.{layer}: {what}", actual.float(), wanted.float(), dtype=coarsest(actual, wanted, *parts)
            )
        )

    def summed(identity: Identity, what: str, total: str, stream: str, *terms: str) -> None:
        # the core identity, on TransformerLens's names: the stream after a block's terms is their sum with the stream
        found, parts = get(total), [get(term) for term in terms]
        expected = stream_sum(get(stream), parts)
        gaps.add(
            expect_holds(
                identity, f"blocks.{layer}: {what}", found.float(), expected, dtype=coarsest(get(stream), *parts, found)
            )
        )

    if layer + 1 < model.num_layers and has("hook_resid_post") and f"blocks.{layer + 1}.hook_resid_pre" in hooks:
        sent, received = get("hook_resid_post"), cache[f"blocks.{layer + 1}.hook_resid_pre"]
        what = f"blocks.{layer + 1}.hook_resid_pre against blocks.{layer}.hook_resid_post"
        expect_holds(STREAM_CONTINUITY, what, received, sent)
    mid, contributions = _terms(block)
    plain_mid = mid == (ATTENTION,)
    if has("hook_resid_pre", "hook_attn_out", "hook_resid_mid"):
        if plain_mid:
            summed(
                MID_STREAM,
                "hook_resid_pre + hook_attn_out against hook_resid_mid",
                "hook_resid_mid",
                "hook_resid_pre",
                "hook_attn_out",
            )
        else:
            skipped["resid_pre + attn_out == resid_mid"] = (
                f"layers[{layer}]'s mid stream adds {', '.join(mid) or 'no attention'}"
            )
    if has("hook_resid_post", "hook_mlp_out"):
        if has("hook_resid_mid") and plain_mid and contributions == (ATTENTION, MLP):
            what = "hook_resid_mid + hook_mlp_out against hook_resid_post"
            summed(CONTRIBUTION, what, "hook_resid_post", "hook_resid_mid", "hook_mlp_out")
        elif _is_parallel(block) and contributions == (ATTENTION, MLP) and has("hook_resid_pre", "hook_attn_out"):
            what = "hook_resid_pre + hook_attn_out + hook_mlp_out against hook_resid_post (a parallel block)"
            summed(CONTRIBUTION, what, "hook_resid_post", "hook_resid_pre", "hook_attn_out", "hook_mlp_out")
        else:
            skipped["resid_mid + mlp_out == resid_post"] = f"layers[{layer}] adds {', '.join(contributions)}"
    if has("hook_mlp_in"):
        # the stream the MLP's pre-norm reads: the mid stream, or on a parallel block the stream entering it
        if has("hook_resid_mid"):
            close(
                "hook_mlp_in against hook_resid_mid, the stream before the MLP's norm",
                get("hook_mlp_in"),
                get("hook_resid_mid"),
            )
        elif _is_parallel(block) and has("hook_resid_pre"):
            close(
                "hook_mlp_in against hook_resid_pre, the stream a parallel block's MLP norm reads",
                get("hook_mlp_in"),
                get("hook_resid_pre"),
            )
        else:
            skipped["mlp_in == resid_mid"] = f"layers[{layer}] serves no stream before its MLP's norm"
    if has("attn.hook_pattern", "attn.hook_v", "attn.hook_z"):
        attention = block.self_attn
        if getattr(attention, "mixed_heads", "attention_head_outputs") == "attention_head_outputs":
            pattern, values, heads = get("attn.hook_pattern"), get("attn.hook_v"), get("attn.hook_z")
            _pattern_against_values(layer, pattern, values, heads, gaps)
        else:
            skipped["z == pattern @ v"] = (
                f"layers[{layer}]'s attention mixes its heads before {attention.mixed_heads}, then gates them"
            )
    if has("attn.hook_attn_scores", "attn.hook_pattern"):
        scores, pattern = get("attn.hook_attn_scores"), get("attn.hook_pattern")
        if hooks[f"blocks.{layer}.attn.hook_attn_scores"] == hooks[f"blocks.{layer}.attn.hook_pattern"]:
            # the table says TransformerLens's hook holds the pattern on this family: so must the toolkit's
            close(
                "hook_attn_scores against hook_pattern (TransformerLens's hook holds the pattern here)", scores, pattern
            )
        else:
            _softmax_against_pattern(layer, block.self_attn, scores, pattern, gaps)


def _pattern_against_values(
    layer: int, pattern: torch.Tensor, values: torch.Tensor, heads: torch.Tensor, gaps: Gaps
) -> None:
    """``hook_z == hook_pattern @ hook_v`` per head (``identities.heads_from_pattern``), on TransformerLens's layouts:
    ``hook_v`` is ``[batch, pos, head_index, d_head]``, each key-value head serving its group."""
    try:
        expected = heads_from_pattern(pattern, values.transpose(1, 2))
    except IdentityMismatch as error:
        raise CheckFailure(
            f"blocks.{layer}: hook_pattern @ hook_v: {error} (TransformerLens's hook_v is [batch, pos, head_index, d_head])"
        ) from None
    what = f"blocks.{layer}: hook_pattern @ hook_v against hook_z, per head"
    gaps.add(
        expect_holds(
            HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES, what, heads.float(), expected, dtype=coarsest(heads, pattern)
        )
    )


def _softmax_against_pattern(
    layer: int, attention: Any, scores: torch.Tensor, pattern: torch.Tensor, gaps: Gaps
) -> None:
    """``softmax(hook_attn_scores) == hook_pattern`` (``identities.softmax_pattern``), the mask inside the scores; a sink
    column joins the softmax, then goes."""
    sinks = attention.sink_logits if attention.sink_column else None
    expected = softmax_pattern(scores, sinks).to(pattern.dtype)
    what = f"blocks.{layer}: softmax(hook_attn_scores) against hook_pattern"
    gaps.add(expect_holds(PATTERN_IS_SOFTMAX_OF_SCORES, what, pattern.float(), expected.float(), dtype=pattern.dtype))


@check("toolkit", applies=single_stream, drawn=False)
def toolkit_groups_sum_to_the_stream(model: StandardModel, case: Case) -> str:
    """The cache's layers.*.contributions group sums, with layer_input, to layer_output on every block, and decompose_resid's terms to the last block's layer_output."""
    from nnterp.toolkit import cache_values
    from nnterp.toolkit.attribution import DECOMPOSE_RESID, decompose_resid

    if not all(isinstance(prompt, str) for prompt in case.prompts):
        raise Skip("needs text prompts: cache_values tokenizes them")
    names = [*DECOMPOSE_RESID, "layers.*.layer_input", "layers.*.layer_output"]
    try:
        cache = cache_values(model, case.batch, names, batch_size=len(case.prompts), progress=False)
    except Unavailable as missing:
        raise Skip(f"the cache cannot read every term the blocks add: {missing}") from None
    gaps = Gaps()
    for layer in range(model.num_layers):
        terms = cache.contributions[layer]
        parts = [cache[f"layers.{layer}.layer_input"], *(cache[f"layers.{layer}.{term}"] for term in terms)]
        output = cache[f"layers.{layer}.layer_output"]
        spelled = " + ".join(term.rsplit(".", 1)[-1] for term in terms)
        what = f"layers[{layer}]: layer_input + the cache's contributions ({spelled}) against layer_output"
        gaps.add(
            expect_holds(
                CONTRIBUTION, what, output.float(), stream_sum(parts[0], parts[1:]), dtype=coarsest(*parts, output)
            )
        )
    values, labels = decompose_resid(cache)
    final = cache[f"layers.{model.num_layers - 1}.layer_output"]
    gaps.add(
        expect_close(
            f"decompose_resid's {len(labels)} terms summed against the last layer_output",
            values.float().sum(0),
            final.float(),
            dtype=coarsest(values, final),
        )
    )
    return f"{model.num_layers} blocks and decompose_resid, {gaps}"
