"""A minimal decoder outside transformers, in plain torch with its own module names: a sandwich block.

Each block is ``x + mix_out_norm(mix(norm_in(x)))`` then
``+ ff_out_norm(ff(norm_ff(.)))``: a norm on each sublayer's output before it
is added, which is the block whose contributions are easy to get wrong. The
attention does its own arithmetic (no shared interface) and keeps a
transformers ``DynamicCache`` so that ``generate`` decodes one token a step.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import DynamicCache, GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast


class ToyConfig(PreTrainedConfig):
    model_type = "nnterp_toy"
    attribute_map = {"num_hidden_layers": "depth", "hidden_size": "width", "num_attention_heads": "heads"}

    vocab_size: int = 320
    width: int = 64
    depth: int = 3
    heads: int = 4
    ffn: int = 128
    max_positions: int = 256
    eps: float = 1e-6
    use_cache: bool = True
    tie_word_embeddings: bool = False


class ToyNorm(nn.Module):
    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class ToyMixer(nn.Module):
    def __init__(self, config: ToyConfig, index: int) -> None:
        super().__init__()
        self.index = index
        self.heads = config.heads
        self.head_dim = config.width // config.heads
        self.query = nn.Linear(config.width, config.width)
        self.key = nn.Linear(config.width, config.width)
        self.value = nn.Linear(config.width, config.width)
        self.out = nn.Linear(config.width, config.width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, cache: DynamicCache | None = None) -> torch.Tensor:
        batch, length, _ = x.shape
        q = self.query(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.key(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        v = self.value(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v, self.index)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + mask
        weights = torch.softmax(scores, dim=-1)
        heads = torch.matmul(weights, v).transpose(1, 2)
        return self.out(heads.reshape(batch, length, -1))


class ToyFeedForward(nn.Module):
    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.width, config.ffn)
        self.act = nn.GELU()
        self.down = nn.Linear(config.ffn, config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class ToyBlock(nn.Module):
    def __init__(self, config: ToyConfig, index: int) -> None:
        super().__init__()
        self.norm_in = ToyNorm(config.width, config.eps)
        self.mix = ToyMixer(config, index)
        self.mix_out_norm = ToyNorm(config.width, config.eps)
        self.norm_ff = ToyNorm(config.width, config.eps)
        self.ff = ToyFeedForward(config)
        self.ff_out_norm = ToyNorm(config.width, config.eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, cache: DynamicCache | None = None) -> torch.Tensor:
        x = x + self.mix_out_norm(self.mix(self.norm_in(x), mask, cache))
        return x + self.ff_out_norm(self.ff(self.norm_ff(x)))


class ToyPreTrainedModel(PreTrainedModel):
    config_class = ToyConfig
    base_model_prefix = "toy"

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.05)
            if module.bias is not None:
                nn.init.normal_(module.bias, std=0.02)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.5)
        elif isinstance(module, ToyNorm):
            nn.init.ones_(module.weight)


class ToyModel(ToyPreTrainedModel):
    def __init__(self, config: ToyConfig) -> None:
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.width)
        self.positions = nn.Embedding(config.max_positions, config.width)
        self.blocks = nn.ModuleList(ToyBlock(config, index) for index in range(config.depth))
        self.final_norm = ToyNorm(config.width, config.eps)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=None):
        batch, length = input_ids.shape
        use_cache = self.config.use_cache if use_cache is None else use_cache
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        past = cache.get_seq_length() if cache is not None else 0
        if attention_mask is None:
            attention_mask = torch.ones(batch, past + length, dtype=torch.long, device=input_ids.device)
        if position_ids is None:
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, -length:]
        x = self.embed(input_ids) + self.positions(position_ids)
        keys = torch.arange(past + length, device=input_ids.device)
        queries = torch.arange(past, past + length, device=input_ids.device)
        allowed = (keys[None, :] <= queries[:, None])[None, None] & attention_mask[:, None, None, :].bool()
        mask = torch.zeros(allowed.shape, dtype=x.dtype).masked_fill(~allowed, torch.finfo(x.dtype).min)
        for block in self.blocks:
            x = block(x, mask, cache)
        return self.final_norm(x), cache


class ToyForCausalLM(ToyPreTrainedModel, GenerationMixin):
    def __init__(self, config: ToyConfig) -> None:
        super().__init__(config)
        self.model = ToyModel(config)
        self.head = nn.Linear(config.width, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=None, **kwargs):
        hidden, cache = self.model(input_ids, attention_mask, position_ids, cache, use_cache)
        return CausalLMOutputWithPast(logits=self.head(hidden), cache=cache)
