"""nnterp 1.3's ``nnterp.interventions``, with its signatures and return layouts, over ``nnterp.toolkit``; each function warns once with its replacement.

``logit_lens(model, prompts)`` is ``toolkit.logit_lens(model, prompts,
positions=-1)``, ``[batch, num_layers, vocab_size]``; ``patchscope_lens`` and
``patchscope_generate`` write ``layer_output`` as the toolkit's do;
``TargetPrompt``, ``TargetPromptBatch``, ``repeat_prompt`` and
``it_repeat_prompt`` are 1.3's own (plain prompt builders). Results are the
toolkit's: float32 probabilities on the CPU (1.3 kept the model's dtype).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import nnsight

import torch
from torch import Tensor

from .legacy import warn_once
from .toolkit import _arguments, lens

__all__ = [
    "TargetPrompt",
    "TargetPromptBatch",
    "logit_lens",
    "patch_object_attn_lens",
    "patchscope_generate",
    "patchscope_lens",
    "repeat_prompt",
    "steer",
]


def _use(name: str, replacement: str, stacklevel: int = 5) -> None:
    # 5: past torch.no_grad's wrapper to the caller
    warn_once(f"nnterp.interventions.{name}", replacement, stacklevel=stacklevel)


@torch.no_grad()
def logit_lens(
    nn_model: Any, prompts: list[str] | str, remote: bool = False, return_inv_logits: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """nnterp 1.3's logit lens at each prompt's last token, ``[batch, num_layers, vocab_size]`` (and the inverse lens with ``return_inv_logits``)."""
    _use("logit_lens", "nnterp.toolkit.logit_lens(model, prompts, positions=-1, inverse=...)")
    return lens.logit_lens(nn_model, prompts, positions=-1, inverse=return_inv_logits, remote=remote)


@dataclass
class TargetPrompt:
    """nnterp 1.3's patchscope target: a prompt and the position whose hidden state is replaced."""

    prompt: str
    index_to_patch: int


def repeat_prompt(
    words: list[str] | None = None, rel: str = " ", sep: str = "\n", placeholder: str = "?", index_to_patch: int = -1
) -> TargetPrompt:
    """The patchscopes paper's repetition prompt (``"king king\\n1135 1135\\nhello hello\\n?"``), patched at ``index_to_patch``."""
    words = ["king", "1135", "hello"] if words is None else words
    return TargetPrompt(sep.join(w + rel + w for w in words) + sep + placeholder, index_to_patch)


def it_repeat_prompt(
    tokenizer: Any,
    words: list[str] | None = None,
    rel: str = " ",
    sep: str = "\n",
    placeholder: str = "?",
    complete_prompt: bool = True,
    add_user_instr: bool = True,
    use_system_prompt: bool = True,
) -> TargetPrompt:
    """``repeat_prompt`` in ``tokenizer``'s chat template, for instruction-tuned models (nnterp 1.3's, unchanged)."""
    prompt = repeat_prompt(words, rel, sep, placeholder).prompt
    answer = {"role": "assistant", "content": prompt if complete_prompt else ""}
    chat = []
    if add_user_instr:
        if use_system_prompt:
            chat.append({"role": "system", "content": "You are a helpful assistant."})
        chat += [
            {
                "role": "user",
                "content": "I will provide you with a series of sentences. Your task is to guess the next word in the sentence. You must answer with the next word only.",
            },
            {"role": "assistant", "content": "Ok."},
            {"role": "user", "content": prompt},
            answer,
        ]
    elif use_system_prompt:
        chat += [
            {
                "role": "system",
                "content": "The user will provide you with a sentence. Your task is to guess the next word in the sentence. You must answer with the next word only.",
            },
            {"role": "user", "content": prompt},
            answer,
        ]
    else:
        chat += [
            {
                "role": "user",
                "content": f"Guess the next word in the following sentence (answer only the next word): {prompt}",
            },
            answer,
        ]
    text = tokenizer.apply_chat_template(chat, tokenize=False, continue_final_message=True, add_special_tokens=False)
    return TargetPrompt(text, -1)


@dataclass
class TargetPromptBatch:
    """nnterp 1.3's batch of target prompts, each with its own position to patch."""

    prompts: list[str]
    index_to_patch: Tensor

    @classmethod
    def from_target_prompts(cls, prompts_: list[TargetPrompt]) -> TargetPromptBatch:
        return cls([p.prompt for p in prompts_], torch.tensor([p.index_to_patch for p in prompts_]))

    @classmethod
    def from_target_prompt(cls, prompt: TargetPrompt, batch_size: int) -> TargetPromptBatch:
        return cls([prompt.prompt] * batch_size, torch.tensor([prompt.index_to_patch] * batch_size))

    @classmethod
    def from_prompts(cls, prompts: str | list[str], index_to_patch: int | list[int] | Tensor) -> TargetPromptBatch:
        prompts = [prompts] if isinstance(prompts, str) else prompts
        if isinstance(index_to_patch, int):
            index_to_patch = torch.tensor([index_to_patch] * len(prompts))
        elif isinstance(index_to_patch, list):
            index_to_patch = torch.tensor(index_to_patch)
        elif not isinstance(index_to_patch, Tensor):
            raise ValueError(f"index_to_patch must be an int, a list of ints or a tensor, got {type(index_to_patch)}")
        return cls(prompts, index_to_patch)

    def __len__(self) -> int:
        return len(self.prompts)

    def __getitem__(self, idx: int) -> TargetPrompt:
        return TargetPrompt(self.prompts[idx], int(self.index_to_patch[idx]))

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    @staticmethod
    def auto(target_prompt: Any, batch_size: int) -> TargetPromptBatch:
        if isinstance(target_prompt, TargetPrompt):
            return TargetPromptBatch.from_target_prompt(target_prompt, batch_size)
        if isinstance(target_prompt, list):
            return TargetPromptBatch.from_target_prompts(target_prompt)
        if not isinstance(target_prompt, TargetPromptBatch):
            raise ValueError(
                f"patch_prompts must be a TargetPrompt, a list of TargetPrompt or a TargetPromptBatch, got {type(target_prompt)}"
            )
        return target_prompt


def _layers(model: Any, layers: Any) -> list[int]:
    if layers is None:
        return list(range(model.num_layers))
    return [layers] if isinstance(layers, int) else list(layers)


@torch.no_grad()
def _patched(model: Any, target: TargetPrompt, layers: list[int], states: Tensor, remote: bool) -> Tensor:
    """Next-token probabilities of ``target`` with ``layer_output[:, index]`` set to ``states[j]`` (``[rows, hidden]``) at ``layers[j]``: ``[rows, len(layers), vocab]``."""
    batch = _arguments.prompts(
        model, [target.prompt] * states.shape[1], function="patchscope_lens", argument="target_patch_prompts"
    )
    out: list[Tensor] = []
    for j, layer in enumerate(layers):
        with _arguments.left_padding(model), model.trace(batch.inputs, remote=remote):
            nnsight.save(out)
            hidden = model.layers[layer].layer_output
            hidden[:, target.index_to_patch] = states[j].to(device=hidden.device, dtype=hidden.dtype)
            out.append(model.logits[:, -1].float().softmax(-1).detach().cpu())
    return torch.stack(out, dim=1)


@torch.no_grad()
def patchscope_lens(
    nn_model: Any,
    source_prompts: list[str] | str | None = None,
    target_patch_prompts: TargetPromptBatch | list[TargetPrompt] | TargetPrompt | None = None,
    layers: int | list[int] | None = None,
    latents: Tensor | None = None,
    remote: bool = False,
    layer_to_patch: int | list[int] | None = None,
) -> Tensor:
    """nnterp 1.3's patchscope lens, ``[num_sources, num_layers, vocab_size]``: ``nnterp.toolkit.patchscope_lens``.

    Each source's last-token ``layer_output`` (or ``latents``, ``[num_layers,
    num_sources, hidden_size]``) replaces its target prompt's state at
    ``index_to_patch`` at the same layer. ``layer_to_patch=`` is 1.3's README
    spelling of ``layers=``.
    """
    _use(
        "patchscope_lens",
        "nnterp.toolkit.patchscope_lens(model, source_prompts, target_prompt, layers=, target_position=)",
    )
    if layer_to_patch is not None:
        warn_once("nnterp.interventions.patchscope_lens(layer_to_patch=)", "layers=", stacklevel=4)
        if layers is not None:
            raise TypeError("patchscope_lens: give layers= or layer_to_patch=, not both")
        layers = layer_to_patch
    target_patch_prompts = repeat_prompt() if target_patch_prompts is None else target_patch_prompts
    if latents is not None and source_prompts is not None:
        raise ValueError("You cannot provide both source_prompts and latents")
    if latents is None and source_prompts is None:
        raise ValueError("Either source_prompts or latents must be provided")
    source_prompts = (
        [source_prompts] if isinstance(source_prompts, str) else source_prompts or []
    )  # none where latents are given
    num_sources = len(latents[0]) if latents is not None else len(source_prompts)
    targets = TargetPromptBatch.auto(target_patch_prompts, num_sources)
    if len(targets) != num_sources:
        raise ValueError(f"Number of sources ({num_sources}) does not match number of patch prompts ({len(targets)})")
    chosen = _layers(nn_model, layers)
    if latents is None and len({(t.prompt, t.index_to_patch) for t in targets}) == 1:
        # one target for every source: one toolkit call
        return lens.patchscope_lens(
            nn_model,
            source_prompts,
            targets[0].prompt,
            layers=chosen,
            target_position=targets[0].index_to_patch,
            remote=remote,
            progress=False,
        )
    rows = []
    for i, target in enumerate(targets):
        if latents is not None:
            rows.append(_patched(nn_model, target, chosen, latents[:, i : i + 1], remote))
        else:
            rows.append(
                lens.patchscope_lens(
                    nn_model,
                    source_prompts[i : i + 1],
                    target.prompt,
                    layers=chosen,
                    target_position=target.index_to_patch,
                    remote=remote,
                    progress=False,
                )
            )
    return torch.cat(rows)


@torch.no_grad()
def patchscope_generate(
    nn_model: Any,
    prompts: list[str] | str,
    target_patch_prompt: TargetPrompt,
    max_length: int = 50,
    layers: list[int] | None = None,
    remote: bool = False,
    max_batch_size: int = 32,
) -> dict[int, Tensor]:
    """nnterp 1.3's patchscope generation, ``{layer: ids}`` with ``ids`` the target prompt and up to ``max_length`` new tokens: ``nnterp.toolkit.patchscope_generate``.

    The toolkit returns the new tokens alone; this puts the target prompt's
    ids in front, as 1.3's generator output held them. ``max_batch_size`` is
    1.3's memory hint, unused.
    """
    _use(
        "patchscope_generate",
        "nnterp.toolkit.patchscope_generate(model, source_prompts, target_prompt, layers=, max_new_tokens=)",
    )
    prompts = [prompts] if isinstance(prompts, str) else prompts
    new = lens.patchscope_generate(
        nn_model,
        prompts,
        target_patch_prompt.prompt,
        layers=layers,
        target_position=target_patch_prompt.index_to_patch,
        max_new_tokens=max_length,
        remote=remote,
        progress=False,
    )
    target = _arguments.prompts(
        nn_model,
        [target_patch_prompt.prompt] * len(prompts),
        function="patchscope_generate",
        argument="target_patch_prompt",
    )
    return {layer: torch.cat([target.input_ids.cpu(), ids], dim=1) for layer, ids in new.items()}


@torch.no_grad()
def patch_object_attn_lens(
    nn_model: Any,
    source_prompts: list[str] | str,
    target_prompts: list[str] | str,
    attn_idx_patch: int,
    num_patches: int = 5,
) -> Tensor:
    """nnterp 1.3's object-attention lens, ``[num_targets, num_layers, vocab_size]``, on ``attention_norm_output``.

    For each layer ``l``, the attention of blocks ``l .. l + num_patches - 1``
    reads, at ``attn_idx_patch`` of the targets, what it read at the sources'
    last token (``attention_norm_output``: 1.3's attention input); the result
    is the targets' next-token distribution. One row per target, each paired
    with the source in the same row (or the one source).
    """
    _use("patch_object_attn_lens", "a trace writing model.layers[l].attention_norm_output[:, index]")
    source_prompts = [source_prompts] if isinstance(source_prompts, str) else source_prompts
    target_prompts = [target_prompts] if isinstance(target_prompts, str) else target_prompts
    sources = _arguments.prompts(nn_model, source_prompts, function="patch_object_attn_lens", argument="source_prompts")
    targets = _arguments.prompts(nn_model, target_prompts, function="patch_object_attn_lens", argument="target_prompts")
    num_layers = nn_model.num_layers
    states: list[Tensor] = []
    with _arguments.left_padding(nn_model), nn_model.trace(sources.inputs):
        nnsight.save(states)
        for layer in range(num_layers):
            states.append(nn_model.layers[layer].attention_norm_output[:, -1].detach())
    out: list[Tensor] = []
    for layer in range(num_layers):
        with _arguments.left_padding(nn_model), nn_model.trace(targets.inputs):
            nnsight.save(out)
            for patched in range(layer, min(num_layers, layer + num_patches)):
                normed = nn_model.layers[patched].attention_norm_output
                normed[:, attn_idx_patch] = states[patched].to(device=normed.device, dtype=normed.dtype)
            out.append(nn_model.logits[:, -1].float().softmax(-1).detach().cpu())
    return torch.stack(out, dim=1)


def steer(
    nn_model: Any,
    layers: int | list[int],
    steering_vector: Tensor,
    factor: float = 1,
    token_positions: Any = None,
    batch_index: Any = None,
) -> None:
    """Add ``factor * steering_vector`` to ``layer_output`` of each of ``layers``, inside a trace: ``nnterp.toolkit.steer``.

    1.3's README imported ``steer`` from here, where 1.3 had none (it was the
    method ``model.steer``); served so that the README runs.
    """
    _use(
        "steer",
        "nnterp.toolkit.steer(model, layers, vector, factor) or model.steer(layers, vector, factor)",
        stacklevel=4,
    )
    from .toolkit.steering import steer as toolkit_steer

    toolkit_steer(nn_model, layers, steering_vector, factor, token_positions=token_positions, batch_index=batch_index)
