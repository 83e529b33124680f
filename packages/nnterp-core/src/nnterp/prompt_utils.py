"""nnterp 1.3's ``nnterp.prompt_utils`` (``Prompt``, ``run_prompts``, ``get_first_tokens``) over ``nnterp.toolkit``'s; each warns once with its replacement.

1.3's ``run_prompts`` returns ``{target: [num_prompts, num_layers]}`` (one
layer for plain next-token prediction), summing each prompt's target tokens
in the distribution ``get_probs_func(model, prompts)`` gives (1.3's
``logit_lens`` from ``nnterp.interventions`` for a lens). The target tokens are
the toolkit's: the first token of each string and of its other spacing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .legacy import warn_once
from .toolkit import lens

__all__ = ["Prompt", "get_first_tokens", "next_token_probs_unsqueeze", "run_prompts"]


def _use(name: str, replacement: str, stacklevel: int = 4) -> None:
    warn_once(f"nnterp.prompt_utils.{name}", replacement, stacklevel=stacklevel)


def _first_tokens(words: str | list[str], llm_or_tokenizer: Any) -> list[int]:
    tokenizer = getattr(llm_or_tokenizer, "tokenizer", llm_or_tokenizer)
    return lens._first_tokens(tokenizer, [words] if isinstance(words, str) else list(words), both_spacings=True)


def get_first_tokens(
    words: str | list[str], llm_or_tokenizer: Any, use_hacky_implementation: bool = False
) -> list[int]:
    """nnterp 1.3's first tokens of ``"word"`` and ``" word"`` for each word (``use_hacky_implementation`` is not needed: unused)."""
    _use("get_first_tokens", "nnterp.toolkit.Prompt.from_strings(text, targets, model).targets")
    return _first_tokens(words, llm_or_tokenizer)


@dataclass
class Prompt:
    """nnterp 1.3's prompt with named target tokens: ``nnterp.toolkit.Prompt`` (``text``, ``targets``)."""

    prompt: str
    target_tokens: dict[str, list[int]]
    target_strings: dict[str, str | list[str]] | None = None

    @classmethod
    def from_strings(
        cls, prompt: str, target_strings: dict[str, str | list[str]] | list[str] | str, tokenizer: Any
    ) -> Prompt:
        """A prompt whose targets are the first tokens of each string, with and without a leading space."""
        _use("Prompt", "nnterp.toolkit.Prompt.from_strings(text, targets, model)")
        if isinstance(target_strings, (str, list)):
            target_strings = {"target": target_strings}
        return cls(
            prompt, {name: _first_tokens(words, tokenizer) for name, words in target_strings.items()}, target_strings
        )

    def has_no_collisions(self, ignore_targets: str | list[str] | None = None) -> bool:
        """Whether no token is a target of two categories (``ignore_targets`` left out)."""
        ignored = [ignore_targets] if isinstance(ignore_targets, str) else ignore_targets or []
        tokens = [token for name, ids in self.target_tokens.items() if name not in ignored for token in ids]
        return len(tokens) == len(set(tokens))

    def get_target_probs(self, probs: Tensor, layer: int | None = None) -> dict[str, Tensor]:
        """Each category's probability mass in ``probs`` ``[batch, layers, vocab]``: ``{target: [batch, layers]}`` (one layer's column with ``layer``)."""
        target_probs = {name: probs[:, :, ids].sum(dim=2).cpu() for name, ids in self.target_tokens.items()}
        return target_probs if layer is None else {name: p[:, layer] for name, p in target_probs.items()}

    @torch.no_grad()
    def run(self, nn_model: Any, get_probs: Callable) -> dict[str, Tensor]:
        """``get_target_probs`` of ``get_probs(nn_model, self.prompt)``."""
        return self.get_target_probs(get_probs(nn_model, self.prompt))


def next_token_probs_unsqueeze(nn_model: Any, prompt: str | list[str], remote: bool = False, **_kwargs: Any) -> Tensor:
    """The next-token distribution with a layer axis of one, ``[batch, 1, vocab_size]``: ``nnterp.toolkit.next_token_probs(...)[:, None]``."""
    return lens.next_token_probs(nn_model, prompt, remote=remote).unsqueeze(1)


@torch.no_grad()
def run_prompts(
    nn_model: Any,
    prompts: list[Prompt],
    batch_size: int = 32,
    get_probs_func: Callable | None = None,
    func_kwargs: dict | None = None,
    remote: bool = False,
    tqdm: Any = None,
) -> dict[str, Tensor]:
    """nnterp 1.3's ``run_prompts``: ``{target: [num_prompts, num_layers]}``, the probability mass of each prompt's target tokens.

    ``get_probs_func(model, prompts, remote=, **func_kwargs)`` gives
    ``[batch, layers, vocab]`` (default: the next-token distribution, one layer).
    """
    _use(
        "run_prompts",
        "nnterp.toolkit.run_prompts(model, prompts) (next-token), or the lens's probabilities indexed by Prompt.targets",
        stacklevel=5,
    )
    if not prompts:
        return {}
    keys = list(prompts[0].target_tokens)
    for prompt in prompts:
        if set(prompt.target_tokens) != set(keys):
            raise ValueError(
                f"All prompts must have the same target keys. Got {set(keys)} and {set(prompt.target_tokens)}"
            )
    get_probs_func = next_token_probs_unsqueeze if get_probs_func is None else get_probs_func
    texts = [prompt.prompt for prompt in prompts]
    probs = torch.cat(
        [
            get_probs_func(nn_model, texts[i : i + batch_size], remote=remote, **(func_kwargs or {}))
            for i in range(0, len(texts), batch_size)
        ]
    )
    return {
        name: torch.stack(
            [probs[i, :, prompt.target_tokens[name]].sum(dim=1) for i, prompt in enumerate(prompts)]
        ).cpu()
        for name in keys
    }
