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


class _PromptPair:
    """The clean and corrupted prompts the patching tests share, one token apart ("J" / "M" after the period), and their metric."""

    clean = "Mary and John met. J gave it to"
    corrupted = "Mary and John met. M gave it to"

    @staticmethod
    def metric(model):
        """Logit difference J - M at the last position, averaged over the batch."""
        tokenizer = model.tokenizer
        j, m = tokenizer("J")["input_ids"][-1], tokenizer("M")["input_ids"][-1]
        return lambda logits: (logits[:, -1, j] - logits[:, -1, m]).mean()

    @classmethod
    def differing_position(cls, model):
        """The one position where the two prompts' tokens differ (they tokenize to the same length)."""
        clean, corrupted = (model.tokenizer(prompt)["input_ids"] for prompt in (cls.clean, cls.corrupted))
        assert len(clean) == len(corrupted)
        differ = [i for i, (a, b) in enumerate(zip(clean, corrupted)) if a != b]
        assert len(differ) == 1
        return differ[0]

    @classmethod
    def hf_metric(cls, model, prompt, forward_hooks=(), pre_hooks=()):
        """``metric(model)`` of a plain HF forward of ``prompt``, with ``(module, hook)`` forward and forward-pre hooks on the HF modules."""
        if not model.dispatched:
            model.dispatch()  # the weights load at the first trace, else here
        inputs = model.tokenizer(prompt, return_tensors="pt")
        handles = [module.register_forward_hook(hook) for module, hook in forward_hooks]
        handles += [module.register_forward_pre_hook(hook) for module, hook in pre_hooks]
        try:
            with torch.no_grad():
                logits = model._module(**inputs).logits
        finally:
            for handle in handles:
                handle.remove()
        return float(cls.metric(model)(logits))


@pytest.fixture
def pair():
    """The patching tests' clean / corrupted prompts (``.clean``, ``.corrupted``), ``.metric(model)``, ``.differing_position(model)``
    and ``.hf_metric(model, prompt, forward_hooks, pre_hooks)``, the metric of a plain HF forward with torch hooks."""
    return _PromptPair
