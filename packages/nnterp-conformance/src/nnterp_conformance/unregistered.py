"""Checkpoints of model types no family names, to show what a load does without one.

``written(directory)`` saves a Llama under names no family uses (``body.blocks``,
``attend``, ``ffn``, ``ln_attend`` ...) and a model type nobody registered, so
``StandardizedTransformer`` infers its family from the module tree and proves it
at load; ``written(directory, leaky=True)`` saves the same tree with a residual
added inside the attention (its block adds the stream no more), whose proof
fails: its contributions are ``Unavailable``, naming the identity. Both register
their config and model classes with transformers' auto classes on import, as a
hub checkpoint's remote code would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nnterp  # noqa: F401 - nnsight before transformers.models

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, GenerationMixin, LlamaConfig, PreTrainedModel
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRMSNorm, LlamaRotaryEmbedding


class RenamedConfig(LlamaConfig):
    model_type = "renamed_llama"


class FeedForward(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.w_gate = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.w_up = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.w_out = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_out(self.act(self.w_gate(x)) * self.w_up(x))


class LeakyAttention(LlamaAttention):
    """Llama's attention adding the residual stream to what it returns, so that its block adds it no more."""

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor, **kwargs):
        output, weights = super().forward(hidden_states, **kwargs)
        return output + residual, weights


class Block(nn.Module):
    attention = LlamaAttention

    def __init__(self, config: LlamaConfig, index: int) -> None:
        super().__init__()
        self.ln_attend = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.attend = self.attention(config, index)
        self.ln_ffn = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.ffn = FeedForward(config)

    def forward(
        self, hidden: torch.Tensor, attention_mask=None, position_embeddings=None, cache=None, **kwargs
    ) -> torch.Tensor:
        attended, _ = self.attend(
            self.ln_attend(hidden), attention_mask=attention_mask, position_embeddings=position_embeddings, cache=cache
        )
        hidden = hidden + attended
        return hidden + self.ffn(self.ln_ffn(hidden))


class LeakyBlock(Block):
    """The block whose attention adds the residual itself: ``layer_input + attention_output`` counts the stream twice."""

    attention = LeakyAttention

    def forward(
        self, hidden: torch.Tensor, attention_mask=None, position_embeddings=None, cache=None, **kwargs
    ) -> torch.Tensor:
        hidden, _ = self.attend(
            self.ln_attend(hidden),
            residual=hidden,
            attention_mask=attention_mask,
            position_embeddings=position_embeddings,
            cache=cache,
        )
        return hidden + self.ffn(self.ln_ffn(hidden))


class RenamedForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = RenamedConfig
    _supports_attention_backend = True
    _supports_sdpa = True
    block = Block
    #: a plain nn.Module holding the renamed parts (nn.Module types its attributes Tensor | Module)
    body: Any

    def __init__(self, config: RenamedConfig) -> None:
        super().__init__(config)
        self.body = nn.Module()
        self.body.tok = nn.Embedding(config.vocab_size, config.hidden_size)
        self.body.blocks = nn.ModuleList(self.block(config, index) for index in range(config.num_hidden_layers))
        self.body.final = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary = LlamaRotaryEmbedding(config=config)
        self.unembed = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.body.tok

    def get_output_embeddings(self) -> nn.Module:
        return self.unembed

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs) -> CausalLMOutputWithPast:
        hidden = self.body.tok(input_ids)
        if position_ids is None:
            position_ids = torch.arange(hidden.shape[1], device=hidden.device)[None]
        mask = create_causal_mask(
            config=self.config,
            inputs_embeds=hidden,
            attention_mask=attention_mask,
            cache=None,
            position_ids=position_ids,
        )
        rotary = self.rotary(hidden, position_ids=position_ids)
        for block in self.body.blocks:
            hidden = block(hidden, attention_mask=mask, position_embeddings=rotary)
        return CausalLMOutputWithPast(logits=self.unembed(self.body.final(hidden)))


class LeakyConfig(RenamedConfig):
    model_type = "leaky_llama"


class LeakyForCausalLM(RenamedForCausalLM):
    config_class = LeakyConfig
    block = LeakyBlock


for config_class, model_class in ((RenamedConfig, RenamedForCausalLM), (LeakyConfig, LeakyForCausalLM)):
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    AutoModelForCausalLM.register(config_class, model_class, exist_ok=True)

SIZES: dict[str, Any] = {
    "vocab_size": 320,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}


def written(directory: str | Path, leaky: bool = False) -> str:
    """Save the renamed Llama (or its leaky variant) with random weights from a fixed seed and the kit's tokenizer into ``directory``."""
    from .checkpoints import build_tokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config((LeakyConfig if leaky else RenamedConfig)(**SIZES))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    model.save_pretrained(directory)
    build_tokenizer().save_pretrained(directory)
    return str(directory)
