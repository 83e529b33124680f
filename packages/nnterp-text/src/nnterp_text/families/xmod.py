"""X-MOD: BERT's post-LN block under ``roberta``, a language adapter after the MLP, RoBERTa's embeddings and head.

Unlike BERT, ``attention.output`` returns ``dense(context) + layer_input`` and
the attention module normalizes it afterwards with ``attention.output.LayerNorm``;
``layer_mid`` is still that norm's output, which the ``intermediate`` is
called with. The block's ``output`` adds ``dense(neurons)`` to the mid stream
and runs the language adapter: with the defaults (``ln_before_adapter``,
``adapter_reuse_layer_norm``) ``h = LayerNorm(mid + dense(neurons))`` then
``h + adapter[lang](h)``, and the block normalizes the result again with the same
``output.LayerNorm``. Neither sublayer's change to the stream is a tensor of
the model: the contributions are unavailable, everything else is BERT's.

Only ``pre_norm=False`` (every released X-MOD checkpoint) is served: with
``pre_norm=True`` the MLP is called with ``output.LayerNorm(mid)``, the adapter
re-normalizes the stream, and a final ``encoder.LayerNorm`` precedes the head,
so the family refuses such a config instead of pointing values at wrong tensors.
The checkpoint needs ``default_language`` (the adapter used when no
``lang_ids`` are passed).
"""

from typing import Any

from nnterp import Mlp, unavailable

from torch import Tensor

from . import bert, roberta
from .bert import BertLayer, BertMlp

PRE_NORM = (
    "X-MOD with pre_norm=True is not served: its MLP reads output.LayerNorm(layer_mid), its language "
    "adapter re-normalizes the stream and encoder.LayerNorm precedes the head"
)

ADAPTED = (
    "a post-LN block with a language adapter: layer_output = output.LayerNorm(h + adapter[lang](h)) with "
    "h = output.LayerNorm(layer_mid + output), so what the MLP changes in the stream includes two norms and "
    "the adapter and is no tensor of the model; the MLP's own output is mlp.down_proj.output"
)


def project_on_vocab(model: Any, hidden: Tensor) -> Tensor:
    """The whole LM head on the stream: the last block's output LayerNorm already normalized it."""
    if model.text_config.pre_norm:
        raise ValueError(PRE_NORM)
    return model.lm_head(hidden)


def _pre_norm(envoy: Any) -> str | None:
    return PRE_NORM if envoy.root._module.config.pre_norm else None


class XmodLayer(BertLayer):
    layer_mid = BertLayer.layer_mid.at(unavailable=_pre_norm)


class XmodMlp(BertMlp):
    mlp_output = unavailable(ADAPTED)
    mlp_neurons = Mlp.mlp_neurons.at("output")


FAMILY = roberta.FAMILY.replace(
    name="xmod",
    model_types=("xmod",),
    envoys={**roberta.FAMILY.envoys, "layers.*": XmodLayer, "layers.*.mlp": XmodMlp},
    project_on_vocab=project_on_vocab,
    # the adapter used when no lang_ids are passed
    tiny=bert.tiny_decoder("xmod", default_language="en_XX"),
    skips={"xmod": bert.POST_LN_SKIPS},
)
