"""ModernBERT decoder: the default block under its names, ``Wi`` a fused ``gate_up_proj``, and logits ``decoder(lm_head(norm(x)))``."""

from typing import Any

from nnterp import TinyConfig
from nnterp.families import default

from torch import Tensor


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The final norm, the prediction head, then the vocabulary projection ``decoder``."""
    return model.decoder(model.lm_head(model.norm(hidden)))


FAMILY = default.FAMILY.replace(
    name="modernbert_decoder",
    model_types=("modernbert-decoder",),
    rename={
        "model.layers": "layers",
        "model.embeddings.tok_embeddings": "embed_tokens",
        "model.final_norm": "norm",
        "attn": "self_attn",
        "attn.Wo": "attn.o_proj",
        "attn_norm": "input_layernorm",
        "mlp_norm": "post_attention_layernorm",
        "mlp.Wi": "mlp.gate_up_proj",
        "mlp.act": "mlp.act_fn",
        "mlp.Wo": "mlp.down_proj",
    },
    project_on_vocab=project_on_vocab,
    tiny={
        "modernbert-decoder": TinyConfig(
            "modernbert-decoder", {"num_hidden_layers": 3, "local_attention": 8, "cls_token_id": 0, "sep_token_id": 0}
        )
    },
)
