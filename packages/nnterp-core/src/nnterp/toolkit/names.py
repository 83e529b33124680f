"""TransformerLens hook names as standard values: the table ``HOOKS``, ``standard_name`` and ``transformer_lens_name``.

Sparse autoencoders (SAELens), probes and notebooks written for TransformerLens
name activations by hook (``blocks.8.hook_resid_pre``). ``HOOKS`` says, for each
hook, which standard value holds the same tensor, how their layouts relate, and
where a family differs (TransformerLens's hook holds something else, or no
standard value holds it). ``standard_name`` turns a hook name into the standard
name ``cache_values`` reads (``"layers.8.layer_input"``), and ``cache_values``
and ``patch_residual(stream=)`` take either spelling.

The table describes TransformerLens 4.3's ``TransformerBridge`` (the hooks as
``run_with_cache`` names them), and is checked against it on tiny checkpoints by
``tests/test_transformer_lens_compare.py``; ``docs/transformer-lens.md`` is
rendered from it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from ..errors import Unavailable
from ..protocols import StandardModel

# -- layouts -------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How a hook's tensor is laid out against its standard value; ``to_transformer_lens(standard)`` is the hook's tensor.

    It acts on the trailing axes only, so it applies as well to a value stacked
    over layers (``cache["blocks.*.attn.hook_q"]``).
    """

    says: str
    to_transformer_lens: Callable[[Tensor], Tensor]


SAME = Layout("the same layout", lambda tensor: tensor)
HEADS_SECOND = Layout(
    "TransformerLens holds `[batch, pos, head, d_head]`, the standard value `[batch, heads, seq, head_dim]`: "
    "`.transpose(-3, -2)` maps either to the other",
    lambda tensor: tensor.transpose(-3, -2),
)


# -- where a family differs -------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """A property of a model (and block) that changes what a hook holds; ``holds(model, layer)`` says whether it has it."""

    says: str
    holds: Callable[[Any, int], bool]


def _config(model: StandardModel) -> Any:
    return model.text_config


def _rotary(model: StandardModel, layer: int) -> bool:
    config = _config(model)
    return any(
        getattr(config, name, None)
        for name in ("rope_parameters", "rope_theta", "rotary_dim", "rotary_pct", "rotary_emb_base")
    )


def _parallel(model: StandardModel, layer: int) -> bool:
    from ..reasons import PARALLEL

    block = model.layers[layer]
    value = getattr(type(block), "layer_mid", None)
    return value is not None and value.reason(block) is PARALLEL


def model_types(*types: str) -> Condition:
    """The condition that the checkpoint's ``config.model_type`` is one of ``types``."""
    return Condition(
        "on " + ", ".join(f"`{name}`" for name in types),
        lambda model, layer: model._module.config.model_type in types,
    )


ROTARY = Condition("where the attention applies a rotary embedding to its queries and keys", _rotary)
NO_ROTARY = Condition("where the attention applies no rotary embedding", lambda model, layer: not _rotary(model, layer))
SOFTCAPPED = Condition(
    "where the logits pass through a final softcap (`final_logit_softcapping`)",
    lambda model, layer: bool(getattr(_config(model), "final_logit_softcapping", None)),
)
PARALLEL_BLOCK = Condition("on a parallel block (the attention and the MLP read the same stream)", _parallel)


def _multi_stream(model: StandardModel, layer: int) -> bool:
    from ..layouts import STREAMS

    value = type(model.layers[layer]).values().get("layer_output")
    return value is not None and STREAMS in (value.dims or ())


MULTI_STREAM = Condition(
    "on a block that carries several residual streams per token (hyper-connections, AltUp)", _multi_stream
)
#: why a stream hook has no standard value on a multi-stream block
_STREAMS_WHY = (
    "TransformerLens's hook is one stream, `[batch, pos, d_model]`, and this block's {value} is several, "
    "`[batch, seq, num_streams, hidden_size]`: no one of them is the stream the block reads or returns (docs/streams.md)"
)


def _one_stream(value: str) -> Unless:
    """The row's case for a multi-stream block: no standard value, ``value`` the one it could be taken for."""
    return Unless(MULTI_STREAM, None, _STREAMS_WHY.format(value=f"`{value}`"), value)


@dataclass(frozen=True)
class Unless:
    """Where ``when`` holds, the hook holds ``standard`` instead (None: no standard value holds it), because ``why``.

    ``nearest`` names, where ``standard`` is None, the standard value the hook
    could be mistaken for, which holds something else; ``absent`` says that
    TransformerLens does not serve the hook there at all.
    """

    when: Condition
    standard: str | None
    why: str
    nearest: str | None = None
    #: whether TransformerLens serves no such hook where ``when`` holds (the row then documents the absence)
    absent: bool = False


# -- the table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Hook:
    """One TransformerLens hook: what it holds, the standard value that holds the same tensor, and where that differs.

    ``name`` is relative to a block (``"attn.hook_q"``: the hook is
    ``blocks.{i}.attn.hook_q``) when ``in_block``, else the model's
    (``"hook_embed"``). ``standard`` is relative to the block likewise
    (``"self_attn.attention_queries"``), or the model's (``"logits"``,
    ``"layers.0.layer_input"``); None where no standard value holds it, and
    then ``why`` says what does and ``nearest`` names the standard value it
    could be mistaken for. The first ``unless`` whose condition holds on a
    model replaces ``standard``.
    """

    name: str
    holds: str
    standard: str | None
    layout: Layout = SAME
    why: str = ""
    nearest: str | None = None
    unless: tuple[Unless, ...] = ()
    in_block: bool = True

    @property
    def spelled(self) -> str:
        """The hook's full name pattern: ``blocks.{i}.attn.hook_q``, ``hook_embed``."""
        return f"blocks.{{i}}.{self.name}" if self.in_block else self.name

    def on(self, model: StandardModel, layer: int = 0) -> tuple[str | None, str, str | None]:
        """``(standard, why, nearest)`` on ``model``'s block ``layer``: the first ``unless`` that holds, else the row's own."""
        for case in self.unless:
            if case.when.holds(model, layer):
                return case.standard, case.why, case.nearest
        return self.standard, self.why, self.nearest


_NORMALIZED = (
    "before its weight and bias: `(x - mean) / scale` (RMS: `x / scale`), while {value} is the norm's output, "
    "`hook_normalized * weight + bias`; the two agree only where the weight is one and the bias zero, as after "
    "TransformerLens's `fold_ln`, whose weights are no longer the checkpoint's"
)
_SCALE = "the norm's divisor, `[batch, pos, 1]`; nnterp serves the norm's output, not its scale"
_PER_HEAD_INPUT = (
    "`[batch, pos, head, d_model]`: a copy of the stream entering the block for each head, served only with "
    "`{flag}` so that one head's input can be edited; every copy equals `layer_input`, which is the value to cache"
)

#: each TransformerLens hook, block hooks first in the order the forward reaches them, then the model's
HOOKS: tuple[Hook, ...] = (
    Hook(
        "hook_resid_pre", "the residual stream entering the block", "layer_input", unless=(_one_stream("layer_input"),)
    ),
    Hook("ln1.hook_scale", "the attention's pre-norm divisor", None, why=_SCALE),
    Hook(
        "ln1.hook_normalized",
        "the attention's pre-norm output before its weight and bias",
        None,
        why=_NORMALIZED.format(value="`attention_norm_output`"),
        nearest="attention_norm_output",
    ),
    Hook(
        "hook_attn_in",
        "the attention's input per head",
        None,
        why=_PER_HEAD_INPUT.format(flag="use_attn_in"),
        nearest="layer_input",
    ),
    Hook(
        "hook_q_input",
        "the queries' input per head",
        None,
        why=_PER_HEAD_INPUT.format(flag="use_split_qkv_input"),
        nearest="layer_input",
    ),
    Hook(
        "hook_k_input",
        "the keys' input per head",
        None,
        why=_PER_HEAD_INPUT.format(flag="use_split_qkv_input"),
        nearest="layer_input",
    ),
    Hook(
        "hook_v_input",
        "the values' input per head",
        None,
        why=_PER_HEAD_INPUT.format(flag="use_split_qkv_input"),
        nearest="layer_input",
    ),
    Hook(
        "attn.hook_q",
        "the queries, as the query projection gives them",
        "self_attn.attention_queries",
        HEADS_SECOND,
        unless=(
            Unless(
                ROTARY,
                None,
                "TransformerLens reads the projection's output, before the rotary embedding (on every rotary family, "
                "partial ones such as GPT-J and GPT-NeoX included); `attention_queries` are after it, and where "
                "TransformerLens has `attn.hook_rot_q` that is the hook that matches them",
                "self_attn.attention_queries",
            ),
        ),
    ),
    Hook(
        "attn.hook_k",
        "the keys, as the key projection gives them (`n_key_value_heads` wide)",
        "self_attn.attention_keys",
        HEADS_SECOND,
        unless=(
            Unless(
                ROTARY,
                None,
                "before the rotary embedding, like `attn.hook_q`; `attention_keys` are after it",
                "self_attn.attention_keys",
            ),
        ),
    ),
    Hook("attn.hook_v", "the values (`n_key_value_heads` wide)", "self_attn.attention_values", HEADS_SECOND),
    Hook(
        "attn.hook_rot_q",
        "the queries after the rotary embedding",
        "self_attn.attention_queries",
        HEADS_SECOND,
        unless=(
            Unless(
                model_types("gptj", "gpt_neox"),
                None,
                "TransformerLens serves no `hook_rot_q` here: the rotary embedding is applied inside the model's "
                "own attention forward, which its adapter does not hook; `attention_queries` are after it",
                absent=True,
            ),
            Unless(
                NO_ROTARY,
                None,
                "TransformerLens serves no `hook_rot_q` without a rotary embedding; `attn.hook_q` holds the queries",
                absent=True,
            ),
        ),
    ),
    Hook(
        "attn.hook_rot_k",
        "the keys after the rotary embedding",
        "self_attn.attention_keys",
        HEADS_SECOND,
        unless=(
            Unless(
                model_types("gptj", "gpt_neox"),
                None,
                "TransformerLens serves no `hook_rot_k` here, as for `hook_rot_q`",
                absent=True,
            ),
            Unless(
                NO_ROTARY,
                None,
                "TransformerLens serves no `hook_rot_k` without a rotary embedding; `attn.hook_k` holds the keys",
                absent=True,
            ),
        ),
    ),
    Hook(
        "attn.hook_attn_scores",
        "the scaled, masked scores entering the softmax",
        "self_attn.attention_scores",
        unless=(
            Unless(
                model_types("gptj", "gpt_neo", "opt", "xglm"),
                "self_attn.attention_probabilities",
                "TransformerLens 4.3 wraps these families' attention in its plain `AttentionBridge`, whose forward "
                "fires `hook_attn_scores` with the attention weights the module returns, which are after the "
                "softmax: the hook holds the pattern, as `hook_pattern` does, and no hook holds the scores "
                "(`attention_scores` does)",
            ),
        ),
    ),
    Hook("attn.hook_pattern", "the attention pattern after the softmax", "self_attn.attention_probabilities"),
    Hook("attn.hook_z", "each head's output before the output projection", "self_attn.attention_head_outputs"),
    Hook(
        "attn.hook_result",
        "each head's output after its slice of the output projection",
        None,
        why="`[batch, pos, head, d_model]`, served only with `use_attn_result`; nnterp serves the heads before the "
        "projection, `attention_head_outputs`: head `h`'s result is `attention_head_outputs[:, :, h] @ W_O[h]`",
    ),
    Hook("ln1_post.hook_scale", "the attention's post-norm divisor (sandwich blocks)", None, why=_SCALE),
    Hook(
        "ln1_post.hook_normalized",
        "the attention's post-norm output before its weight (sandwich blocks: Gemma 2 and 3, OLMo 2)",
        None,
        why=_NORMALIZED.format(value="`self_attn.attention_output`"),
        nearest="self_attn.attention_output",
    ),
    Hook("hook_attn_out", "what the attention adds to the stream (after any post-norm)", "self_attn.attention_output"),
    Hook(
        "hook_resid_mid",
        "the stream between the attention and the MLP; absent on parallel blocks, where `layer_mid` is unavailable too",
        "layer_mid",
        unless=(_one_stream("layer_mid"),),
    ),
    Hook(
        "hook_mlp_in",
        "the stream the MLP's pre-norm reads (served only with `use_hook_mlp_in`)",
        "layer_mid",
        unless=(
            _one_stream("layer_mid"),
            Unless(
                PARALLEL_BLOCK,
                "layer_input",
                "the MLP's pre-norm reads the stream entering the block (GPT-J has no second norm, so "
                "TransformerLens never fires the hook there)",
            ),
        ),
    ),
    Hook("ln2.hook_scale", "the MLP's pre-norm divisor", None, why=_SCALE),
    Hook(
        "ln2.hook_normalized",
        "the MLP's pre-norm output before its weight and bias",
        None,
        why=_NORMALIZED.format(value="`mlp_norm_output`"),
        nearest="mlp_norm_output",
    ),
    Hook(
        "mlp.hook_pre",
        "the MLP's pre-activation: the up projection's output (on a gated MLP, the gate projection's)",
        None,
        why="nnterp serves what the activation gives, `mlp.mlp_activation`, and the neurons, `mlp.mlp_neurons`, "
        "not the activation's input",
        nearest="mlp.mlp_activation",
    ),
    Hook(
        "mlp.hook_pre_linear",
        "on a gated MLP, the up projection's output",
        None,
        why="the factor the activation multiplies; nnterp serves the product, `mlp.mlp_neurons`",
        nearest="mlp.mlp_neurons",
    ),
    Hook("mlp.hook_post", "the neurons the down projection reads", "mlp.mlp_neurons"),
    Hook("ln2_post.hook_scale", "the MLP's post-norm divisor (sandwich blocks)", None, why=_SCALE),
    Hook(
        "ln2_post.hook_normalized",
        "the MLP's post-norm output before its weight (sandwich blocks)",
        None,
        why=_NORMALIZED.format(value="`mlp.mlp_output`"),
        nearest="mlp.mlp_output",
    ),
    Hook("hook_mlp_out", "what the MLP adds to the stream (after any post-norm)", "mlp.mlp_output"),
    Hook(
        "hook_resid_post",
        "the residual stream leaving the block",
        "layer_output",
        unless=(_one_stream("layer_output"),),
    ),
    Hook(
        "hook_embed",
        "the token embeddings",
        None,
        why="the token embeddings alone: where a family adds position embeddings before block 0 (GPT-2, GPT-Neo, "
        "OPT, XGLM) nnterp serves only the sum, `layers.0.layer_input`",
        nearest="layers.0.layer_input",
        unless=(
            Unless(
                model_types("llama", "mistral", "qwen2", "gemma2", "gptj", "gpt_neox"),
                "layers.0.layer_input",
                "nothing is added to the token embeddings before block 0 (Gemma's scale is inside its embedding module)",
            ),
        ),
        in_block=False,
    ),
    Hook(
        "hook_pos_embed",
        "the learned position embeddings (GPT-2, GPT-Neo, OPT)",
        None,
        why="nnterp serves the stream block 0 reads, `layers.0.layer_input` (token plus position embeddings), not the positions alone",
        in_block=False,
    ),
    Hook("ln_final.hook_scale", "the final norm's divisor", None, why=_SCALE, in_block=False),
    Hook(
        "ln_final.hook_normalized",
        "the final norm's output before its weight and bias",
        None,
        why="nnterp serves no final-norm value: `model.project_on_vocab(layers[-1].layer_output)` applies the norm "
        "and the unembedding, and `logits` is their result",
        in_block=False,
    ),
    Hook(
        "hook_unembed",
        "the unembedding's output",
        "logits",
        unless=(
            Unless(
                SOFTCAPPED,
                None,
                "TransformerLens's hook is the unembedding's output before the final logit softcap "
                "(`c * tanh(x / c)`, Gemma 2); `logits` are after it",
                "logits",
            ),
        ),
        in_block=False,
    ),
)

_BY_NAME = {hook.name: hook for hook in HOOKS}
_BLOCK_NAME = re.compile(r"^(layers|blocks)\.(\*|-?\d+)\.(.+)$")


# -- errors --------------------------------------------------------------------------------


class NoStandardValue(Unavailable):
    """A TransformerLens hook no standard value holds on this model, and why (an ``Unavailable``)."""

    def __init__(self, hook: str, model_type: str, reason: str) -> None:
        super().__init__("TransformerLens", hook, reason)
        self.args = (f"TransformerLens's {hook} has no standard value on {model_type}: {reason}",)


class UnknownName(KeyError):
    """A name that is neither a TransformerLens hook nor a standard value; the message names the nearest of each."""

    def __str__(self) -> str:
        return str(self.args[0])


# -- translating ---------------------------------------------------------------------------


def standard_name(model: StandardModel, name: str) -> str:
    """The standard spelling of ``name``: a TransformerLens hook name translated, a standard name passed through.

    ``"blocks.3.hook_resid_pre"`` -> ``"layers.3.layer_input"``, ``"blocks.*.attn.hook_z"``
    -> ``"layers.*.self_attn.attention_head_outputs"``, ``"hook_unembed"`` ->
    ``"logits"``; a block-relative hook (``"hook_resid_pre"``) gives the
    block-relative standard name (``"layer_input"``). The value read under the
    standard name is the hook's tensor after ``Hook.layout``'s
    ``to_transformer_lens``. Raises ``NoStandardValue`` (an ``Unavailable``)
    for a hook no standard value holds on this model, saying why, and
    ``UnknownName`` (a ``KeyError``) for a name that is neither spelling.
    """
    if name in _BY_NAME and not _BY_NAME[name].in_block:
        return _translate(model, _BY_NAME[name], name, layers=[0], prefix="")
    match = _BLOCK_NAME.match(name)
    if match is not None and match.group(1) == "blocks":
        where, rest = match.group(2), match.group(3)
        hook = _BY_NAME.get(rest)
        if hook is None or not hook.in_block:
            raise UnknownName(_unknown_message(model, name))
        return _translate(model, hook, name, layers=_layers(model, where, name), prefix=f"layers.{where}.")
    if name in _BY_NAME:  # block-relative
        return _translate(model, _BY_NAME[name], name, layers=list(range(model.num_layers)), prefix="")
    if _is_standard(model, name):
        return name
    raise UnknownName(_unknown_message(model, name))


def transformer_lens_name(model: StandardModel, name: str) -> str:
    """The TransformerLens hook whose tensor is the standard value ``name`` on this model: the reverse of ``standard_name``.

    ``"layers.3.self_attn.attention_head_outputs"`` -> ``"blocks.3.attn.hook_z"``;
    block-relative names give block-relative hooks. Where several hooks hold
    the value, one whose name means it before one that holds it on this family
    only (GPT-J's ``hook_attn_scores`` holds the pattern: the pattern's hook is
    ``hook_pattern``), then the first in ``HOOKS`` (the block's own before the
    model's: ``layers.0.layer_input`` is ``blocks.0.hook_resid_pre``). A hook
    name passes through. Raises ``KeyError`` where no hook holds the value.
    """
    match = _BLOCK_NAME.match(name)
    if (match is not None and match.group(1) == "blocks") or name in _BY_NAME:
        standard_name(model, name)  # checks it
        return name
    if not _is_standard(model, name):
        raise UnknownName(_unknown_message(model, name))
    if match is not None:
        where, value = match.group(2), match.group(3)
        layers, prefix, wanted = _layers(model, where, name), f"blocks.{where}.", value
    else:
        layers, prefix, wanted = list(range(model.num_layers)), "", name
    # a hook whose name means the value first (hook_pattern, not GPT-J's hook_attn_scores that holds it too)
    for own in (True, False):
        for hook in HOOKS:
            if own and hook.standard != (wanted if hook.in_block else name):
                continue
            if hook.in_block and all(hook.on(model, layer)[0] == wanted for layer in layers):
                return prefix + hook.name
            if not hook.in_block and hook.on(model)[0] == name:
                return hook.name
    raise KeyError(
        f"no TransformerLens hook holds {name!r} on {model._module.config.model_type} (docs/transformer-lens.md)"
    )


def hook_of(name: str) -> Hook | None:
    """The table's row for a TransformerLens name (``"blocks.3.attn.hook_q"``, ``"attn.hook_q"``, ``"hook_embed"``), else None."""
    match = _BLOCK_NAME.match(name)
    if match is not None and match.group(1) == "blocks":
        hook = _BY_NAME.get(match.group(3))
        return hook if hook is not None and hook.in_block else None
    return _BY_NAME.get(name)


def _translate(model: StandardModel, hook: Hook, name: str, layers: list[int], prefix: str) -> str:
    found = {hook.on(model, layer) for layer in layers}
    if len(found) > 1:
        raise ValueError(
            f"{name!r} holds different values on different blocks of this model "
            f"({sorted(str(standard) for standard, _, _ in found)}): name the block, 'blocks.<i>.{hook.name}'"
        )
    standard, why, _ = found.pop()
    if standard is None:
        raise NoStandardValue(name, model._module.config.model_type, why)
    return prefix + standard if hook.in_block else standard


def _layers(model: StandardModel, where: str, name: str) -> list[int]:
    if where == "*":
        return list(range(model.num_layers))
    index = int(where)
    if not -model.num_layers <= index < model.num_layers:
        raise KeyError(f"{name!r}: the model has {model.num_layers} layers")
    return [index % model.num_layers]


def _root_names(model: StandardModel) -> list[str]:
    from .cache import _root_values

    before, after = _root_values(model)
    return before + after


def _block_values(model: StandardModel, layers: Iterable[int]) -> set[str]:
    from .cache import CONTRIBUTIONS, orders_by_structure

    values: set[str] = {CONTRIBUTIONS}  # the group of a block's terms, which expand_names expands
    known: dict[tuple, list[str]] = {}
    for layer in layers:
        values.update(orders_by_structure(model.layers[layer], known))
    return values


def _is_standard(model: StandardModel, name: str) -> bool:
    if name in _root_names(model):
        return True
    match = _BLOCK_NAME.match(name)
    if match is not None:
        where = match.group(2)
        if where != "*" and not -model.num_layers <= int(where) < model.num_layers:
            return True  # expand_names says the layer is out of range
        return match.group(3) in _block_values(model, _layers(model, where, name))
    return name in _block_values(model, range(model.num_layers))


def _unknown_message(model: StandardModel, name: str) -> str:
    match = _BLOCK_NAME.match(name)
    where = match.group(2) if match is not None else None
    hooks = [hook.spelled.replace("{i}", where) if hook.in_block and where else hook.name for hook in HOOKS]
    values = _root_names(model) + [
        f"layers.{where}.{value}" if where else value for value in sorted(_block_values(model, [0]))
    ]
    near_hooks = difflib.get_close_matches(name, hooks, n=3, cutoff=0.5)
    near_values = difflib.get_close_matches(name, values, n=3, cutoff=0.5)
    return (
        f"{name!r} is neither a TransformerLens hook name nor a standard value; "
        f"nearest hooks: {', '.join(near_hooks) or '(none)'}; nearest standard values: {', '.join(near_values) or '(none)'}. "
        "Standard names are a root value (" + ", ".join(_root_names(model)) + ") or 'layers.<i or *>.<value>' "
        "(model.support() lists the values); hook names are listed in docs/transformer-lens.md"
    )
