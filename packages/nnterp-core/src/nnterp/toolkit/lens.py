"""Reading predictions off the residual stream: logit lens, patchscopes, next-token probabilities, tracked targets.

Everything here reads standard values (``layer_output``, ``logits``) and
``model.project_on_vocab``, so it runs unchanged on every family. Prompts are
strings or token ids (a tensor, id lists, the tokenizer's encoding); a batch
is left-padded whatever side the tokenizer pads, so positions are each
prompt's own and ``-1`` is every prompt's last token. Arguments are checked
before the model runs (``nnterp.InvalidArgument``). Results are probabilities
(softmax in float32), or the lens's logits where asked (``output="logits"``),
detached, on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import nnsight

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..protocols import StandardModel
from . import _arguments
from . import _hooks as hooks

__all__ = [
    "Prompt",
    "logit_lens",
    "next_token_probs",
    "patchscope_generate",
    "patchscope_lens",
    "run_prompts",
    "topk_closest_tokens",
]

Positions = int | Sequence[int] | slice | Tensor | None


def _probs(logits: Tensor) -> Tensor:
    return logits.float().softmax(-1).detach().cpu()


def _at(probs: Tensor, positions: Positions) -> Tensor:
    """``probs`` without the seq axis where ``positions`` is one index (it was kept, one wide, for the projection)."""
    one = positions.ndim == 0 if isinstance(positions, Tensor) else hasattr(positions, "__index__")
    return probs[:, 0] if one else probs


OUTPUTS = ("probs", "logits")


def _output(output: Any, function: str) -> str:
    if output not in OUTPUTS:
        raise _arguments.InvalidArgument(
            function, "output", output, "expected 'probs' (softmax, float32) or 'logits' (project_on_vocab, float32)"
        )
    return output


@torch.no_grad()
def logit_lens(
    model: StandardModel,
    prompts: Any,
    *,
    output: str = "probs",
    embeddings: bool = False,
    inverse: bool = False,
    positions: Positions = None,
    remote: bool | str = False,
    engine: str = "auto",
) -> Tensor | tuple[Tensor, Tensor]:
    """What each block's residual stream predicts: ``softmax(project_on_vocab(layer_output))`` at every layer.

    ``prompts`` are strings or token ids, left-padded into one batch. Returns
    ``[batch, num_layers, seq, vocab_size]``. ``positions`` selects each
    prompt's own positions (negative from its last token, non-negative from
    its first; one outside the shortest prompt is refused) the way indexing
    does: an int drops the seq axis
    (``positions=-1``, every prompt's last token, gives nnterp 1.x's
    ``[batch, num_layers, vocab_size]``), a list or slice keeps it. The last
    layer's lens is the model's own next-token distribution.

    ``output="logits"`` gives ``project_on_vocab(layer_output)`` itself (in
    float32; the last layer's are the model's logits, softcap and scale
    included), ``"probs"`` (the default) their softmax. With
    ``embeddings=True`` a row comes first: the lens on
    ``layers[0].layer_input``, the stream as block 0 reads it (the token
    embeddings, plus the position embeddings where a family adds them, times
    the scale where one is inside the embedding module, Gemma's
    ``sqrt(hidden_size)``), giving ``[batch, num_layers + 1, seq, vocab_size]``.

    With ``inverse=True`` the result is ``(lens, inverse_lens)``, where
    ``inverse_lens`` is the lens on the negated stream,
    ``softmax(project_on_vocab(-layer_output))`` (nnterp 1.x's
    ``return_inv_logits``; logits with ``output="logits"``, the embedding
    row with ``embeddings=True``): the tokens the stream points away from.
    With an odd final norm and no ``lm_head`` bias (RMSNorm families) it is
    ``softmax(-logits)``.

    On a model carrying several residual streams per token (hyper-connections:
    DeepSeek-V4, HY-V4; AltUp: Gemma 3n), ``layer_output`` is ``[batch, seq,
    num_streams, hidden_size]`` and ``project_on_vocab`` collapses the streams
    the way the model does after its last block (its ``hc_head``, whose weights
    it computes from the streams themselves; Gemma 3n's unembedding projections
    and their mean), then applies the final norm and ``lm_head``:
    each layer's lens is what the model would predict were that block its
    last, and the last layer's is still the model's own distribution.

    Where every block's ``layer_output`` (and block 0's ``layer_input``) is
    read at a module boundary and the family's ``project_on_vocab`` is a
    plain module computation (the final norm, ``lm_head``, a softcap or a
    scale), the streams come off forward hooks on the model's plain forward,
    which ends after the last block, and are projected after it: the same
    values bit for bit (``nnterp.toolkit._hooks``). ``engine="nnsight"``
    forces the trace, ``engine="hooks"`` refuses a model it does not fit.
    """
    return _lens(
        model,
        prompts,
        "logit_lens",
        output=output,
        embeddings=embeddings,
        inverse=inverse,
        positions=positions,
        remote=remote,
        engine=engine,
    )


def _lens(
    model: StandardModel,
    prompts: Any,
    function: str,
    *,
    output: str,
    embeddings: bool,
    inverse: bool,
    positions: Positions,
    remote: bool | str,
    engine: str,
    translate: Callable[[int, Tensor], Tensor] | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    """The lens of ``logit_lens`` (``function`` names the caller in errors); ``translate(row, stream)``, if given, maps each row's stream before the projection."""
    _arguments.outside_trace(function)
    output = _output(output, function)
    if not isinstance(embeddings, bool):
        raise _arguments.InvalidArgument(
            function,
            "embeddings",
            embeddings,
            "expected True (a first row, the lens on layers[0].layer_input) or False",
        )
    batch = _arguments.prompts(model, prompts, function=function)
    # an int keeps its axis until the projection, so the stream keeps its layout (several streams included)
    width = batch.input_ids.shape[1]
    chosen = (
        None if positions is None else _arguments.prompt_positions(positions, batch.lengths(), width, function=function)
    )
    finish = _probs if output == "probs" else lambda logits: logits.float().detach().cpu()
    rows: list[Tensor] = []
    inverse_rows: list[Tensor] = []

    def project(hidden: Tensor) -> None:
        if chosen is not None:
            hidden = hidden[torch.arange(len(batch))[:, None], chosen.to(hidden.device)]
        if translate is not None:
            hidden = translate(len(rows), hidden)
        rows.append(_at(finish(model.project_on_vocab(hidden)), positions))
        if inverse:
            inverse_rows.append(_at(finish(model.project_on_vocab(-hidden)), positions))

    with _arguments.left_padding(model):
        streams = _streams_on_hooks(model, batch, engine, remote, embeddings)
    if streams is not None:
        for hidden in streams:
            project(hidden)
    else:
        with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
            nnsight.save(rows)
            nnsight.save(inverse_rows)
            if embeddings:
                project(model.layers[0].layer_input)
            for layer in model.layers:
                project(layer.layer_output)
    lens = torch.stack(rows, dim=1)
    return (lens, torch.stack(inverse_rows, dim=1)) if inverse else lens


def _plain_projection(model: StandardModel) -> bool:
    """Whether the family's ``project_on_vocab`` is one of ``nnterp.logits``' module computations, which run the same outside a trace."""
    from .. import logits

    chosen = model.family.project_on_vocab
    plain = (
        logits.unembed,
        logits.softcapped,
        logits.times_logit_scale,
        logits.divided_by_logits_scaling,
        logits.times_logits_scaling,
    )
    return chosen is None or chosen in plain


def _streams_on_hooks(
    model: StandardModel, batch: _arguments.Batch, engine: str, remote: bool | str, embeddings: bool = False
) -> list[Tensor] | None:
    """Every block's ``layer_output`` (after block 0's ``layer_input`` with ``embeddings``) off forward hooks, or None where the lens must trace (``engine`` allowing)."""
    hosts = [(model.layers[0], "layer_input")] if embeddings else []
    hosts += [(layer, "layer_output") for layer in model.layers]
    boundaries, why = hooks.choose(model, hosts, engine, remote)
    if boundaries is not None and not _plain_projection(model):
        boundaries, why = None, f"the {model.family.name} family projects on the vocabulary with its own function"
    if boundaries is not None:
        try:
            return hooks.read(model, boundaries, (batch.inputs,))
        except hooks.NotAtBoundary as error:
            why = str(error)
    if engine == "hooks":
        raise ValueError(f"engine='hooks': {why}; pass engine='auto' or 'nnsight' to read it through a trace")
    return None


@torch.no_grad()
def _streams(
    model: StandardModel, batch: _arguments.Batch, engine: str, remote: bool | str, embeddings: bool
) -> list[Tensor]:
    """The streams the lens projects, detached where the model runs: block 0's ``layer_input`` (with ``embeddings``), then every ``layer_output``."""
    with _arguments.left_padding(model):
        streams = _streams_on_hooks(model, batch, engine, remote, embeddings)
    if streams is not None:
        return streams
    read: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
        nnsight.save(read)
        if embeddings:
            read.append(model.layers[0].layer_input.detach().clone())
        for layer in model.layers:
            read.append(layer.layer_output.detach().clone())
    return read


@torch.no_grad()
def next_token_probs(
    model: StandardModel,
    prompts: Any,
    *,
    edit: Callable[[Any], Any] | None = None,
    remote: bool | str = False,
) -> Tensor:
    """The model's next-token distribution after each prompt, ``[batch, vocab_size]``.

    ``softmax(logits)`` at the last position (every prompt's last token, the
    batch being left-padded). ``edit(model)``, if given, is called inside the
    trace before the logits are read, so the distribution is the one under
    that intervention (e.g. ``lambda m: steer(m, 3, v)``).
    """
    return _next_token_probs(model, _batch(model, prompts, "next_token_probs"), edit, remote)


def _batch(model: StandardModel, prompts: Any, function: str, argument: str = "prompts") -> _arguments.Batch:
    """The call's prompts as a left-padded ``Batch``, once it is known not to run inside a trace."""
    _arguments.outside_trace(function)
    return _arguments.prompts(model, prompts, function=function, argument=argument)


def _next_token_probs(
    model: StandardModel, batch: _arguments.Batch, edit: Callable[[Any], Any] | None, remote: bool | str
) -> Tensor:
    out: list[Tensor] = []
    with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
        nnsight.save(out)
        if edit is not None:
            edit(model)
        out.append(_probs(model.logits[:, -1]))
    return out[0]


def _from_end(sources: _arguments.Batch, positions: Any, function: str) -> Tensor:
    """Each source's position, one int for all or one per source, counted in its own tokens and returned from the end (so it holds in the left-padded batch)."""
    lengths = sources.lengths()
    given = positions
    if (isinstance(positions, Tensor) and positions.ndim == 0) or (
        not isinstance(positions, Tensor) and hasattr(positions, "__index__")
    ):
        positions = [positions] * len(lengths)
    positions = positions.tolist() if isinstance(positions, Tensor) else positions
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence) or len(positions) != len(lengths):
        raise _arguments.InvalidArgument(
            function,
            "positions",
            given,
            f"expected one int for every source, or a list of one per source ({len(lengths)})",
        )
    counted = []
    for row, (position, length) in enumerate(zip(positions, lengths)):
        at = _arguments.index(
            position, length, function=function, argument=f"positions[{row}]", what=f"tokens of source {row}"
        )
        counted.append(at - length)
    return torch.tensor(counted)


@torch.no_grad()
def _source_states(
    model: StandardModel, sources: _arguments.Batch, from_end: Tensor, layers: list[int], remote: bool | str
) -> Tensor:
    """``layer_output`` of each source prompt at its position, ``[num_sources, len(layers), hidden_size]``."""
    rows = torch.arange(len(sources))
    states: dict[int, Tensor] = {}
    with _arguments.left_padding(model), model.trace(sources.inputs, remote=remote):
        nnsight.save(states)
        for layer in sorted(set(layers)):  # read in forward order
            states[layer] = model.layers[layer].layer_output[rows, from_end].detach()
    return torch.stack([states[layer] for layer in layers], dim=1)


def _patchscope(
    model: StandardModel,
    function: str,
    source_prompts: Any,
    target_prompt: Any,
    positions: Any,
    layers: Any,
    target_position: Any,
    remote: bool | str,
):
    """Everything both patchscopes check before the model runs, then the sources' states: ``(layers, target batch, target position, states)``."""
    sources = _batch(model, source_prompts, function, "source_prompts")
    target = _arguments.prompts(model, target_prompt, function=function, argument="target_prompt")
    if len(target) != 1:
        raise _arguments.InvalidArgument(
            function, "target_prompt", target_prompt, f"{len(target)} prompts", "give one target prompt"
        )
    chosen = _arguments.layers(model, layers, function=function)
    from_end = _from_end(sources, positions, function)
    at = _arguments.index(
        target_position,
        target.input_ids.shape[1],
        function=function,
        argument="target_position",
        what="tokens of the target",
    )
    batch = _arguments.Batch(target.input_ids.repeat(len(sources), 1), target.attention_mask.repeat(len(sources), 1))
    return chosen, batch, at, _source_states(model, sources, from_end, chosen, remote)


@torch.no_grad()
def patchscope_lens(
    model: StandardModel,
    source_prompts: Any,
    target_prompt: Any,
    *,
    positions: int | Sequence[int] = -1,
    layers: int | Sequence[int] | None = None,
    target_position: int = -1,
    remote: bool | str = False,
    progress: bool = True,
) -> Tensor:
    """What the target prompt predicts next once a source's hidden state is written into it, per layer.

    Returns ``[num_sources, len(layers), vocab_size]`` (all layers by
    default). For each layer ``l``: the sources' ``layers[l].layer_output``
    at ``positions`` (one int for all, or one per source; each source's own
    positions, negative from its end, non-negative from its first token) is
    assigned to ``layers[l].layer_output[:, target_position]`` in a run of
    ``target_prompt`` (one row per source); the result is that run's
    next-token distribution. Prompts are strings or token ids; layers and
    positions out of range are refused. One trace for the sources, then one
    per layer. Patching a prompt's own state into itself changes nothing; at
    the last layer with ``target_position=-1`` the result is the source's own
    lens at that position.
    """
    chosen, target, at, states = _patchscope(
        model, "patchscope_lens", source_prompts, target_prompt, positions, layers, target_position, remote
    )
    out: list[Tensor] = []
    for j, layer in enumerate(tqdm(chosen, desc="patchscope", disable=not progress)):
        with _arguments.left_padding(model), model.trace(target.inputs, remote=remote):
            nnsight.save(out)
            hidden = model.layers[layer].layer_output
            hidden[:, at] = states[:, j].to(device=hidden.device, dtype=hidden.dtype)
            out.append(_probs(model.logits[:, -1]))
    return torch.stack(out, dim=1)


@torch.no_grad()
def patchscope_generate(
    model: StandardModel,
    source_prompts: Any,
    target_prompt: Any,
    *,
    positions: int | Sequence[int] = -1,
    layers: int | Sequence[int] | None = None,
    target_position: int = -1,
    max_new_tokens: int = 5,
    remote: bool | str = False,
    progress: bool = True,
    **generate_kwargs: Any,
) -> dict[int, Tensor]:
    """What the target prompt goes on to say once a source's hidden state is written into it, per layer.

    Returns ``{layer: ids}`` (layers counted from 0, a negative one
    resolved), ``ids`` the generated tokens only,
    ``[num_sources, <= max_new_tokens]`` (decode with
    ``model.tokenizer.batch_decode``). The patch is the one
    ``patchscope_lens`` makes, applied to the prompt's forward pass only
    (not to the generated steps' forwards): the tokens generated after it
    see it through the cache. Greedy unless ``generate_kwargs`` say
    otherwise (they go to ``model.generate``).
    """
    function = "patchscope_generate"
    max_new_tokens = _arguments.count(max_new_tokens, function=function, argument="max_new_tokens")
    chosen, target, at, states = _patchscope(
        model, function, source_prompts, target_prompt, positions, layers, target_position, remote
    )
    generate_kwargs.setdefault("do_sample", False)
    prompt_length = target.input_ids.shape[1]
    result: dict[int, Tensor] = {}
    for j, layer in enumerate(tqdm(chosen, desc="patchscope", disable=not progress)):
        ids: list[Tensor] = []
        with (
            _arguments.left_padding(model),
            model.generate(target.inputs, max_new_tokens=max_new_tokens, remote=remote, **generate_kwargs) as tracer,
        ):
            nnsight.save(ids)
            hidden = model.layers[layer].layer_output
            hidden[:, at] = states[:, j].to(device=hidden.device, dtype=hidden.dtype)
            ids.append(tracer.result.detach().cpu())
        result[layer] = ids[0][:, prompt_length:]
    return result


@torch.no_grad()
def topk_closest_tokens(model: StandardModel, vector: Tensor, k: int = 5, *, using: str = "unembedding") -> Any:
    """The ``k`` tokens whose unembedding (or embedding) rows are closest in cosine similarity to ``vector``.

    ``vector`` is ``[..., hidden_size]``; returns ``torch.topk``'s
    ``(values, indices)``, each ``[..., k]``: the cosine similarities and the
    token ids (``model.tokenizer.convert_ids_to_tokens``). ``using`` is
    ``"unembedding"`` (rows of ``lm_head.weight``, the default: what the
    stream would write into the logits, with no final norm) or
    ``"embedding"`` (rows of ``embed_tokens.weight``). Reads the weights
    locally (loading them if no trace has yet), so call it outside a trace.
    Ids past the tokenizer's vocabulary are padding rows of the matrix.
    """
    function = "topk_closest_tokens"
    _arguments.outside_trace(function)
    if using not in ("unembedding", "embedding"):
        raise _arguments.InvalidArgument(function, "using", using, "expected 'unembedding' or 'embedding'")
    _arguments.loaded(model)
    weight = (model.lm_head if using == "unembedding" else model.embed_tokens)._module.weight
    vector = _arguments.vector(vector, weight.shape[-1], function=function, argument="vector")
    k = _arguments.count(k, function=function, argument="k")
    if k > weight.shape[0]:
        raise _arguments.InvalidArgument(
            function,
            "k",
            k,
            f"more tokens than the {weight.shape[0]} rows of the {using}",
            f"give k <= {weight.shape[0]}",
        )
    weight = weight.detach().float()
    vector = vector.detach().to(device=weight.device, dtype=torch.float32)
    similarity = torch.nn.functional.normalize(vector, dim=-1) @ torch.nn.functional.normalize(weight, dim=-1).T
    return similarity.cpu().topk(k, dim=-1)


# -- prompts with tracked targets --------------------------------------------------


def _first_tokens(tokenizer: Any, words: Sequence[str], both_spacings: bool) -> list[int]:
    tokens: list[int] = []
    for word in words:
        variants = [word]
        if both_spacings:
            variants.append(word[1:] if word.startswith(" ") else " " + word)
        found = []
        for variant in variants:
            ids = tokenizer(variant, add_special_tokens=False)["input_ids"]
            if ids:
                found.append(ids[0])
        if not found:
            raise ValueError(f"{word!r} tokenizes to no token")
        for token in found:
            if token not in tokens:
                tokens.append(token)
    return tokens


@dataclass
class Prompt:
    """A prompt and named sets of target tokens whose next-token probabilities are tracked.

    ``targets`` maps a category (``"answer"``, ``"distractor"``...) to token
    ids; ``target_strings`` keeps the strings they came from, if any. Build
    one from strings with `Prompt.from_strings`.
    """

    text: str
    targets: dict[str, list[int]]
    target_strings: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_strings(
        cls,
        text: str,
        targets: dict[str, str | Sequence[str]],
        model_or_tokenizer: Any,
        *,
        both_spacings: bool = True,
    ) -> Prompt:
        """A prompt whose targets are the first token of each string, as ``model.tokenizer`` splits it alone.

        ``targets`` maps a category to a string or a list of strings. With
        ``both_spacings`` the string with its leading space toggled counts
        too (``"Paris"`` and ``" Paris"``); duplicates are dropped. The first
        token is taken literally: a tokenizer that splits ``" Paris"`` into a
        bare space token and ``"Paris"`` makes the space token the target,
        so check ``targets`` (or give ids directly) on such tokenizers.
        """
        tokenizer = getattr(model_or_tokenizer, "tokenizer", model_or_tokenizer)
        strings = {name: [words] if isinstance(words, str) else list(words) for name, words in targets.items()}
        tokens = {name: _first_tokens(tokenizer, words, both_spacings) for name, words in strings.items()}
        return cls(text, tokens, strings)

    def target_probs(self, probs: Tensor) -> dict[str, float]:
        """Each category's total probability in a ``[vocab_size]`` next-token distribution."""
        return {name: probs[ids].sum().item() for name, ids in self.targets.items()}


@torch.no_grad()
def run_prompts(
    model: StandardModel,
    prompts: Sequence[Prompt],
    *,
    edit: Callable[[Any], Any] | None = None,
    batch_size: int = 32,
    remote: bool | str = False,
    progress: bool = True,
) -> list[dict[str, float]]:
    """Each prompt's target probabilities: per prompt, ``{category: probability mass of its target tokens}``.

    The next-token distribution after each prompt (`next_token_probs`; a
    prompt's ``text`` is a string or token ids), in batches of ``batch_size``
    prompts, one left-padded trace each. ``edit(model)``, if
    given, is called inside every trace before the logits are read, so the
    targets are tracked through that intervention.
    """
    function = "run_prompts"
    _arguments.outside_trace(function)
    batch_size = _arguments.count(batch_size, function=function, argument="batch_size")
    prompts = [prompts] if isinstance(prompts, Prompt) else list(prompts)
    if not prompts or not all(isinstance(prompt, Prompt) for prompt in prompts):
        kinds = sorted({type(prompt).__name__ for prompt in prompts}) or ["nothing"]
        raise _arguments.InvalidArgument(
            function,
            "prompts",
            prompts,
            f"a list of {', '.join(kinds)}; expected a list of Prompt",
            "build them with Prompt.from_strings",
        )
    batches = [
        _arguments.prompts(model, [prompt.text for prompt in prompts[start : start + batch_size]], function=function)
        for start in range(0, len(prompts), batch_size)
    ]
    results: list[dict[str, float]] = []
    for start, ids in zip(
        tqdm(range(0, len(prompts), batch_size), desc="prompts", disable=not progress or len(batches) < 2), batches
    ):
        batch = prompts[start : start + batch_size]
        probs = _next_token_probs(model, ids, edit, remote)
        results.extend(prompt.target_probs(row) for prompt, row in zip(batch, probs))
    return results
