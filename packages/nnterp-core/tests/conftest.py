"""What the toolkit's tests hold its results against."""

import pytest
import torch


def _read_directly(model, prompts, names):
    """The standard values ``names`` (concrete dotted names, in forward order) read in one plain trace of ``prompts``."""
    out = []
    with torch.no_grad(), model.trace(prompts):
        for name in names:
            host = model
            *path, value = name.split(".")
            for segment in path:
                host = host[int(segment)] if segment.isdigit() else getattr(host, segment)
            out.append(getattr(host, value).detach().clone())
    return dict(zip(names, out))


@pytest.fixture
def read_directly():
    """``read_directly(model, prompts, names)``: each named standard value, by name, from one plain trace."""
    return _read_directly
