"""Hypothesis strategies for the cheap inputs a check runs on: prompts, batch shape, block, head, edit.

Prompts are token-id lists, so their lengths are exact: a batch of one to three
prompts of one to twelve tokens, left-padded into one batch by the trace.
"""

from __future__ import annotations

from hypothesis import strategies as st

from .checks.base import Case

#: ids the tiny tokenizer holds beyond the special token 0 (pad, bos and eos)
TOKEN_IDS = st.integers(min_value=1, max_value=255)
EDITS = ("scale", "noise", "zero")


def prompts(min_length: int = 1, max_length: int = 12) -> st.SearchStrategy[tuple[int, ...]]:
    """One prompt as token ids, ``min_length`` to ``max_length`` long."""
    return st.lists(TOKEN_IDS, min_size=min_length, max_size=max_length).map(tuple)


def batches(max_batch: int = 3, max_length: int = 12) -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    """One to ``max_batch`` prompts of any lengths up to ``max_length``."""
    return st.lists(prompts(max_length=max_length), min_size=1, max_size=max_batch).map(tuple)


def cases(max_batch: int = 3, max_length: int = 12) -> st.SearchStrategy[Case]:
    """A batch, and which block, head and edit a check exercises on it."""
    fraction = st.floats(min_value=0, max_value=1, exclude_max=True)
    return st.builds(
        Case,
        prompts=batches(max_batch, max_length),
        block=fraction,
        head=fraction,
        edit=st.sampled_from(EDITS),
        seed=st.integers(min_value=0, max_value=2**16),
    )
