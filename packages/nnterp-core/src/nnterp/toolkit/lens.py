"""Reading predictions off the residual stream: logit lens, patchscopes, next-token probabilities, tracked targets.

Everything here reads standard values (``layer_output``, ``logits``) and
``model.project_on_vocab``, so it runs unchanged on every family. Prompts are
a string or a list of strings; a batch is left-padded, so position ``-1`` is
every prompt's last token. Results are probabilities (softmax in float32),
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

from . import _hooks as hooks

__all__ = [
    "logit_lens",
    "patchscope_lens",
    "patchscope_generate",
    "next_token_probs",
    "topk_closest_tokens",
    "Prompt",
    "run_prompts",
]

Positions = int | Sequence[int] | slice | Tensor | None


def _prompts(prompts: str | Sequence[str]) -> list[str]:
    return [prompts] if isinstance(prompts, str) else list(prompts)


def _probs(logits: Tensor) -> Tensor:
    return logits.float().softmax(-1).detach().cpu()


def _layers(model: Any, layers: int | Sequence[int] | None) -> list[int]:
    if layers is None:
        return list(range(model.num_layers))
    layers = [layers] if isinstance(layers, int) else list(layers)
    return [layer % model.num_layers for layer in layers]


def _at(probs: Tensor, positions: Positions) -> Tensor:
    """``probs`` without the seq axis where ``positions`` is an int (it was kept, one wide, for the projection)."""
    return probs[:, 0] if isinstance(positions, int) else probs


@torch.no_grad()
def logit_lens(
    model: Any,
    prompts: str | Sequence[str],
    *,
    inverse: bool = False,
    positions: Positions = None,
    remote: bool | str = False,
    engine: str = "auto",
) -> Tensor | tuple[Tensor, Tensor]:
    """What each block's residual stream predicts: ``softmax(project_on_vocab(layer_output))`` at every layer.

    Returns ``[batch, num_layers, seq, vocab_size]``. ``positions`` selects
    sequence positions the way indexing does: an int drops the seq axis
    (``positions=-1``, every prompt's last token, gives nnterp 1.x's
    ``[batch, num_layers, vocab_size]``), a list or slice keeps it. The last
    layer's lens is the model's own next-token distribution.

    With ``inverse=True`` the result is ``(probs, inverse_probs)``, where
    ``inverse_probs`` is the lens on the negated stream,
    ``softmax(project_on_vocab(-layer_output))`` (nnterp 1.x's
    ``return_inv_logits``): the tokens the stream points away from. With an
    odd final norm and no ``lm_head`` bias (RMSNorm families) it is
    ``softmax(-logits)``.

    On a model carrying several residual streams per token (hyper-connections:
    DeepSeek-V4, HY-V4; AltUp: Gemma 3n), ``layer_output`` is ``[batch, seq,
    num_streams, hidden_size]`` and ``project_on_vocab`` collapses the streams
    the way the model does after its last block (its ``hc_head``, whose weights
    it computes from the streams themselves; Gemma 3n's unembedding projections
    and their mean), then applies the final norm and ``lm_head``:
    each layer's lens is what the model would predict were that block its
    last, and the last layer's is still the model's own distribution.

    Where every block's ``layer_output`` is read at a module boundary and the
    family's ``project_on_vocab`` is a plain module computation (the final
    norm, ``lm_head``, a softcap or a scale), the streams come off forward
    hooks on the model's plain forward, which ends after the last block, and
    are projected after it: the same probabilities bit for bit
    (``nnterp.toolkit._hooks``). ``engine="nnsight"`` forces the trace,
    ``engine="hooks"`` refuses a model it does not fit.
    """
    prompts = _prompts(prompts)
    probs: list[Tensor] = []
    inverse_probs: list[Tensor] = []

    def project(hidden: Tensor) -> None:
        if positions is not None:
            # an int keeps its axis until the projection, so the stream keeps its layout (several streams included)
            hidden = hidden[:, [positions] if isinstance(positions, int) else positions]
        probs.append(_at(_probs(model.project_on_vocab(hidden)), positions))
        if inverse:
            inverse_probs.append(_at(_probs(model.project_on_vocab(-hidden)), positions))

    streams = _streams_on_hooks(model, prompts, engine, remote)
    if streams is not None:
        for hidden in streams:
            project(hidden)
    else:
        with model.trace(prompts, remote=remote):
            nnsight.save(probs)
            nnsight.save(inverse_probs)
            for layer in model.layers:
                project(layer.layer_output)
    lens = torch.stack(probs, dim=1)
    return (lens, torch.stack(inverse_probs, dim=1)) if inverse else lens


def _plain_projection(model: Any) -> bool:
    """Whether the family's ``project_on_vocab`` is one of ``nnterp.logits``' module computations, which run the same outside a trace."""
    from .. import logits

    chosen = model.family.project_on_vocab
    plain = (logits.unembed, logits.softcapped, logits.times_logit_scale, logits.divided_by_logits_scaling, logits.times_logits_scaling)
    return chosen is None or chosen in plain


def _streams_on_hooks(model: Any, prompts: list[str], engine: str, remote: bool | str) -> list[Tensor] | None:
    """Every block's ``layer_output`` off forward hooks, or None where the lens must trace (``engine`` allowing)."""
    boundaries, why = hooks.choose(model, [(layer, "layer_output") for layer in model.layers], engine, remote)
    if boundaries is not None and not _plain_projection(model):
        boundaries, why = None, f"the {model.family.name} family projects on the vocabulary with its own function"
    if boundaries is not None:
        try:
            return hooks.read(model, boundaries, (prompts,))
        except hooks.NotAtBoundary as error:
            why = str(error)
    if engine == "hooks":
        raise ValueError(f"engine='hooks': {why}; pass engine='auto' or 'nnsight' to read it through a trace")
    return None


@torch.no_grad()
def next_token_probs(
    model: Any,
    prompts: str | Sequence[str],
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
    prompts = _prompts(prompts)
    out: list[Tensor] = []
    with model.trace(prompts, remote=remote):
        nnsight.save(out)
        if edit is not None:
            edit(model)
        out.append(_probs(model.logits[:, -1]))
    return out[0]


def _from_end(model: Any, prompts: list[str], positions: int | Sequence[int]) -> Tensor:
    """Each prompt's position counted from the end, so that it survives left padding."""
    positions = [positions] * len(prompts) if isinstance(positions, int) else list(positions)
    if len(positions) != len(prompts):
        raise ValueError(f"{len(positions)} positions for {len(prompts)} source prompts: give one int, or one per prompt")
    counted = []
    for prompt, position in zip(prompts, positions):
        length = len(model.tokenizer(prompt)["input_ids"])
        if not -length <= position < length:
            raise IndexError(f"position {position} is outside {prompt!r}, which has {length} tokens")
        counted.append(position - length if position >= 0 else position)
    return torch.tensor(counted)


@torch.no_grad()
def _source_states(
    model: Any, prompts: list[str], positions: int | Sequence[int], layers: list[int], remote: bool | str
) -> Tensor:
    """``layer_output`` of each source prompt at its position, ``[num_sources, len(layers), hidden_size]``."""
    from_end = _from_end(model, prompts, positions)
    rows = torch.arange(len(prompts))
    states: dict[int, Tensor] = {}
    with model.trace(prompts, remote=remote):
        nnsight.save(states)
        for layer in sorted(set(layers)):  # read in forward order
            states[layer] = model.layers[layer].layer_output[rows, from_end].detach()
    return torch.stack([states[layer] for layer in layers], dim=1)


@torch.no_grad()
def patchscope_lens(
    model: Any,
    source_prompts: str | Sequence[str],
    target_prompt: str,
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
    at ``positions`` (one int for all, or one per source; negative counts
    from the end, non-negative from each prompt's first token, padding
    aside) is assigned to ``layers[l].layer_output[:, target_position]`` in
    a run of ``target_prompt`` (one row per source); the result is that
    run's next-token distribution. One trace for the sources, then one per
    layer. Patching a prompt's own state into itself changes nothing; at
    the last layer with ``target_position=-1`` the result is the source's
    own lens at that position.
    """
    sources = _prompts(source_prompts)
    chosen = _layers(model, layers)
    states = _source_states(model, sources, positions, chosen, remote)
    out: list[Tensor] = []
    for j, layer in enumerate(tqdm(chosen, desc="patchscope", disable=not progress)):
        with model.trace([target_prompt] * len(sources), remote=remote):
            nnsight.save(out)
            hidden = model.layers[layer].layer_output
            hidden[:, target_position] = states[:, j].to(device=hidden.device, dtype=hidden.dtype)
            out.append(_probs(model.logits[:, -1]))
    return torch.stack(out, dim=1)


@torch.no_grad()
def patchscope_generate(
    model: Any,
    source_prompts: str | Sequence[str],
    target_prompt: str,
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
    ``patchscope_lens`` makes, applied to the prompt's forward pass only;
    the tokens generated after it see it through the cache. Greedy unless
    ``generate_kwargs`` say otherwise (they go to ``model.generate``).
    """
    sources = _prompts(source_prompts)
    chosen = _layers(model, layers)
    states = _source_states(model, sources, positions, chosen, remote)
    generate_kwargs.setdefault("do_sample", False)
    prompt_length = len(model.tokenizer(target_prompt)["input_ids"])
    result: dict[int, Tensor] = {}
    for j, layer in enumerate(tqdm(chosen, desc="patchscope", disable=not progress)):
        ids: list[Tensor] = []
        batch = [target_prompt] * len(sources)
        with model.generate(batch, max_new_tokens=max_new_tokens, remote=remote, **generate_kwargs) as tracer:
            nnsight.save(ids)
            hidden = model.layers[layer].layer_output
            hidden[:, target_position] = states[:, j].to(device=hidden.device, dtype=hidden.dtype)
            ids.append(tracer.result.detach().cpu())
        result[layer] = ids[0][:, prompt_length:]
    return result


@torch.no_grad()
def topk_closest_tokens(model: Any, vector: Tensor, k: int = 5, *, using: str = "unembedding") -> Any:
    """The ``k`` tokens whose unembedding (or embedding) rows are closest in cosine similarity to ``vector``.

    ``vector`` is ``[..., hidden_size]``; returns ``torch.topk``'s
    ``(values, indices)``, each ``[..., k]``: the cosine similarities and the
    token ids (``model.tokenizer.convert_ids_to_tokens``). ``using`` is
    ``"unembedding"`` (rows of ``lm_head.weight``, the default: what the
    stream would write into the logits, with no final norm) or
    ``"embedding"`` (rows of ``embed_tokens.weight``). Reads the weights
    locally, so the model's weights must be loaded here. Ids past the
    tokenizer's vocabulary are padding rows of the matrix.
    """
    if using == "unembedding":
        weight = model.lm_head.weight
    elif using == "embedding":
        weight = model.embed_tokens.weight
    else:
        raise ValueError(f"using={using!r}: choose 'unembedding' or 'embedding'")
    if vector.shape[-1] != weight.shape[-1]:
        raise ValueError(f"vector is {tuple(vector.shape)}, the model's rows are {weight.shape[-1]} wide")
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
    model: Any,
    prompts: Sequence[Prompt],
    *,
    edit: Callable[[Any], Any] | None = None,
    batch_size: int = 32,
    remote: bool | str = False,
    progress: bool = True,
) -> list[dict[str, float]]:
    """Each prompt's target probabilities: per prompt, ``{category: probability mass of its target tokens}``.

    The next-token distribution after each prompt (`next_token_probs`), in
    batches of ``batch_size`` prompts, one trace each. ``edit(model)``, if
    given, is called inside every trace before the logits are read, so the
    targets are tracked through that intervention.
    """
    prompts = list(prompts)
    results: list[dict[str, float]] = []
    starts = range(0, len(prompts), batch_size)
    for start in tqdm(starts, desc="prompts", disable=not progress or len(starts) < 2):
        batch = prompts[start : start + batch_size]
        probs = next_token_probs(model, [prompt.text for prompt in batch], edit=edit, remote=remote)
        results.extend(prompt.target_probs(row) for prompt, row in zip(batch, probs))
    return results
