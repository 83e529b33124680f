"""The prompt checks read a small batch back as lists and reduce a large one in torch: both answer alike."""

from __future__ import annotations

import pytest
import torch

from nnterp import _prompts


@pytest.mark.parametrize("small", [0, 10**9])
@pytest.mark.parametrize("seed", range(20))
def test_the_list_and_torch_paths_agree(monkeypatch, small, seed):
    monkeypatch.setattr(_prompts, "SMALL", small)
    generator = torch.Generator().manual_seed(seed)
    rows, seq = int(torch.randint(1, 5, (1,), generator=generator)), int(torch.randint(1, 9, (1,), generator=generator))
    ids = torch.randint(-3, 40, (rows, seq), generator=generator)
    mask = (torch.rand(rows, seq, generator=generator) < 0.6).long()
    assert _prompts._outside(ids, 32) == bool(((ids < 0) | (ids >= 32)).any())
    assert _prompts._filled(mask) == mask.any(-1).tolist()
    assert _prompts._filled(mask.bool()) == mask.any(-1).tolist()
