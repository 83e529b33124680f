"""What some families do to the logits after ``lm_head``, for their ``project_on_vocab``.

A family module whose model changes its logits assigns one of these as its
``project_on_vocab``, so that a stream projected on the vocabulary (a logit
lens, the kit's last-layer check) gets what the model itself computes.
"""

from typing import Any

import torch


def unembed(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The final norm, then ``lm_head``: what the default family does.

    The norm's output is cast to ``lm_head``'s weights' dtype first, as a model keeping its stream in float32 under
    half-precision weights does itself (Mamba's ``residual_in_fp32``); elsewhere the cast changes nothing.
    """
    normed = model.norm(hidden)
    weight = getattr(model.lm_head._module, "weight", None)
    return model.lm_head(normed if weight is None else normed.to(weight.dtype))


def softcapped(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """``cap * tanh(logits / cap)`` with the config's ``final_logit_softcapping`` (Gemma-2/3), where it is set."""
    logits = unembed(model, hidden)
    cap = getattr(model.text_config, "final_logit_softcapping", None)
    return logits if cap is None else torch.tanh(logits / cap) * cap


def times_logit_scale(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The logits times the model's ``logit_scale`` (Cohere)."""
    return unembed(model, hidden) * model._module.logit_scale


def divided_by_logits_scaling(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The logits divided by the config's ``logits_scaling`` (Granite)."""
    return unembed(model, hidden) / model.text_config.logits_scaling


def times_logits_scaling(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The logits times the config's ``logits_scaling`` (HyperCLOVA X, which multiplies where Granite divides)."""
    return unembed(model, hidden) * model.text_config.logits_scaling
