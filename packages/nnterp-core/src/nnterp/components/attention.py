"""Softmax attention: its contribution, its pattern, and the interior of the shared interface."""

from typing import Any, ClassVar

from torch import Tensor

from ..descriptors import EProperty, redefining
from ..layouts import HeadOutputs, Keys, Pattern, Queries, Residual, Values
from .standard import Standard

#: the call of transformers' shared attention interface in an attention forward;
#: attention_interface_0 is the binding ``attention_interface = ...get_interface(...)``
INTERFACE = "attention_interface_1"


def _config(envoy: Any) -> Any:
    config = getattr(envoy._module, "config", None)
    return config if config is not None else envoy.root._module.config


def needs_eager(envoy: Any) -> str | None:
    """Why a value read inside the eager attention forward is unavailable, or None."""
    implementation = getattr(_config(envoy), "_attn_implementation", None) or "eager"
    if implementation == "eager":
        return None
    return (
        f"this model runs attn_implementation={implementation!r}, whose kernel never "
        "materializes the attention interior; load with "
        "StandardizedTransformer(..., attn_implementation='eager') to read it"
    )


def interface_reason(envoy: Any) -> str | None:
    """Why the values read inside the shared interface are unavailable on ``envoy``: its ``off_interface``."""
    return envoy.off_interface()


#: the values read inside the attention (every one but its contribution), in forward order
INTERIOR = (
    "attention_queries",
    "attention_keys",
    "attention_values",
    "attention_scores",
    "attention_probabilities",
    "attention_head_outputs",
)


def each_interior(change: Any) -> Any:
    """A class decorator: every interior value of the attention class, as ``change(inherited value)`` makes it.

    For a family that moves all of them alike (reads them one module down,
    makes them all depend on a config switch) instead of six near-identical lines::

        @each_interior(lambda value: value.at(f"self.{value.key}"))
        class BertAttention(Attention): ...
    """

    return redefining(INTERIOR, change)


def seq_first(value: Tensor) -> Tensor:
    """``[batch, heads, seq, head_dim]`` <-> ``[batch, seq, heads, head_dim]``, as a view; its own inverse."""
    return value.transpose(1, 2)


def _inside(operation: str) -> str:
    return f"source.{INTERFACE}.source.{operation}"


class Attention(Standard):
    """A softmax-attention module: its contribution, its pattern, and its interior.

    Everything but ``attention_output`` is read inside transformers' shared
    ``eager_attention_forward``, reached through the module's
    ``attention_interface`` call (``INTERFACE``): the queries, keys and values
    it receives, the scores entering its softmax, the pattern leaving it, and
    the per-head outputs it returns. They are unavailable unless the model was
    loaded with ``attn_implementation="eager"``; ``off_interface`` is the one
    place that decides.

    Sizes (``num_heads``, ``num_kv_heads``, ``head_dim``, ``qk_head_dim``) are
    this block's, read off the module, so they hold outside a trace and on a
    model whose blocks differ.
    """

    lacks = "this block's mixer is softmax attention, which keeps no recurrent state"

    #: whether the softmax ran over one more column than the pattern has, its last (a learned sink logit per head), so
    #: the pattern's rows sum to less than one: False here; GPT-OSS's and Flint's ``SinkAttention`` set it
    sink_column: ClassVar[bool] = False

    def off_interface(self) -> str | None:
        """Why the shared attention interface does not run on this module, or None."""
        return needs_eager(self)

    @EProperty("output", "What the attention adds to the residual stream", select=0)
    def attention_output(self, value: Tensor) -> Residual:
        """The attention's contribution to the residual stream, ``[batch, seq, hidden_size]``.

        What the block adds to ``layer_input``. In-place edits and assignment
        reach the model.
        """
        return value

    @EProperty(f"source.{INTERFACE}.inputs", "Queries the attention interface receives", interface_reason, 1)
    def attention_queries(self, value: Tensor) -> Queries:
        """The queries the attention interface receives, ``[batch, num_heads, seq, qk_head_dim]``.

        After the projection and, where the family has them, the rotary
        embeddings. Assign to replace them; in-place edits reach the model
        where torch allows them (not on GPT-2's split views of ``c_attn``).
        """
        return value

    @EProperty(f"source.{INTERFACE}.inputs", "Keys the attention interface receives", interface_reason, 2)
    def attention_keys(self, value: Tensor) -> Keys:
        """The keys the attention interface receives, ``[batch, num_kv_heads, seq, qk_head_dim]``.

        Before ``repeat_kv``: under grouped-query attention the head axis is
        ``num_kv_heads`` wide. Assign to replace them.
        """
        return value

    @EProperty(f"source.{INTERFACE}.inputs", "Values the attention interface receives", interface_reason, 3)
    def attention_values(self, value: Tensor) -> Values:
        """The values the attention interface receives, ``[batch, num_kv_heads, seq, head_dim]``, before ``repeat_kv``."""
        return value

    @EProperty(_inside("nn_functional_softmax_0.input"), "Scaled, masked scores entering the softmax", interface_reason)
    def attention_scores(self, value: Tensor) -> Pattern:
        """The scaled, masked scores entering the softmax, ``[batch, num_heads, query, key]``.

        ``softmax(attention_scores)`` is ``attention_probabilities`` up to the
        dtype cast. Assign to replace them; in-place edits reach the model.
        """
        return value

    @EProperty(
        _inside("nn_functional_dropout_0.output"), "The attention pattern the values are mixed with", interface_reason
    )
    def attention_probabilities(self, value: Tensor) -> Pattern:
        """The attention pattern, ``[batch, num_heads, query, key]``.

        The probabilities as the values are mixed with them: after the softmax,
        the cast to the model's dtype and the dropout. Rows sum to one. Read it,
        edit it in place, or assign a tensor of the same shape::

            with model.trace(prompt):
                pattern = model.layers[1].self_attn.attention_probabilities.save()
                model.layers[1].self_attn.attention_probabilities[:, 2] = 0
        """
        return value

    @EProperty(f"source.{INTERFACE}.output", "Each head's output before the output projection", interface_reason, 0)
    def attention_head_outputs(self, value: Tensor) -> HeadOutputs:
        """Each head's output before they are joined and projected, ``[batch, seq, num_heads, head_dim]``.

        What the interface returns; the module reshapes it to
        ``[batch, seq, num_heads * head_dim]`` and applies the output projection
        to get ``attention_output``. Assign, or edit in place.
        """
        return value

    #: the name of this attention's value that is ``attention_probabilities @ values``, seq first, read off the value
    #: itself: ``attention_head_outputs``, or, on an attention that gates or scales its heads after mixing them, the
    #: value that holds them before (``ungated_head_outputs``); the proof's and the kit's
    #: ``head_outputs_are_pattern_against_values`` read it
    mixed_heads: ClassVar[str] = attention_head_outputs.name

    # -- what the kit's interior identities rest on ---------------------------------

    def score_bias(self) -> Tensor | None:
        """What the scores add to ``scaling * queries @ keys^T`` besides the mask and the softcap, read in a trace.

        None here: the shared interface adds nothing else. A family whose
        scores carry a bias (ALiBi on BLOOM, MPT and Falcon) overrides it to
        return that bias, broadcastable to ``[batch, num_heads, query, key]``;
        the kit's ``scores_are_queries_against_keys`` adds it, and fails on a
        family that adds a term it does not declare here.
        """
        return None

    # -- sizes -------------------------------------------------------------------

    @property
    def scaling(self) -> float:
        """What the scores multiply ``queries @ keys^T`` by: the module's ``scaling`` (or its spellings), else ``1 / sqrt(qk_head_dim)``."""
        value = self._first("scaling", "inv_norm_factor", "softmax_scale")
        return float(value) if isinstance(value, (int, float)) else self.qk_head_dim**-0.5

    @property
    def softcap(self) -> float | None:
        """The cap ``c`` of ``c * tanh(scores / c)`` the scores pass through before the mask, or None (Gemma 2's and Grok's)."""
        value = self._first("attn_logit_softcapping", "softcap")
        if value is None:
            value = getattr(_config(self), "attn_logit_softcapping", None)
        return float(value) if value else None

    def _first(self, *names: str) -> Any:
        for name in names:
            value = getattr(self._module, name, None)
            if value is not None:
                return value
        return None

    @property
    def head_dim(self) -> int:
        """Width of one head's values and outputs: the module's ``v_head_dim``, else its ``head_dim``."""
        value = self._first("v_head_dim", "head_dim", "head_size")
        if value is None:
            config = _config(self)
            value = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return int(value)

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's queries and keys: the module's ``qk_head_dim``, else ``head_dim``."""
        value = self._first("qk_head_dim")
        return int(value) if value is not None else self.head_dim

    @property
    def num_heads(self) -> int:
        """Query heads: the module's ``num_heads`` (or its spellings), else the output projection's width over ``head_dim``."""
        value = self._first("num_heads", "num_attention_heads", "n_heads", "n_head")
        if value is None:
            config = getattr(self._module, "config", None)
            value = getattr(config, "num_attention_heads", None)
        if value is None:
            value = self.o_proj._module.in_features // self.head_dim
        return int(value)

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads as projected: ``num_key_value_heads`` or its spellings, else ``num_heads``."""
        value = self._first("num_key_value_heads", "num_kv_heads", "kv_heads")
        if value is None:
            groups = self._first("num_key_value_groups")
            value = self.num_heads // groups if groups else None
        if value is None:
            config = getattr(self._module, "config", None)
            value = getattr(config, "num_key_value_heads", None)
        return int(value) if value is not None else self.num_heads


class GatedAttention(Attention):
    """An attention that gates each head's output before the projection (AFMoE, Qwen3-Next's attention blocks).

    The head outputs are what the output projection receives, split per head
    (``ungated_head_outputs`` holds them before the gate):
    ``o_proj.input`` viewed as ``[batch, seq, num_heads, head_dim]``, after the
    gate, so ``o_proj(attention_head_outputs)`` is still the projection the
    module makes. Edits in place land; assignments are joined back.
    """

    @EProperty("o_proj.input", "Each head's gated output, as the output projection receives it", interface_reason)
    def attention_head_outputs(self, value: Tensor) -> HeadOutputs:
        return value.unflatten(-1, (self.num_heads, self.head_dim))

    @EProperty(
        f"source.{INTERFACE}.output",
        "Each head's output before the gate: what the interface returns",
        interface_reason,
        0,
    )
    def ungated_head_outputs(self, value: Tensor) -> HeadOutputs:
        """Each head's output before the gate (or norm), ``[batch, seq, num_heads, head_dim]``: the pattern against the values.

        Where the kit's ``head_outputs_are_pattern_against_values`` checks a
        gated attention, since ``attention_head_outputs`` are read after the gate.
        """
        return value

    mixed_heads = ungated_head_outputs.name

    @attention_head_outputs.transform
    def attention_head_outputs(self, value: Tensor, served: Tensor) -> Tensor:
        return value.flatten(-2)

    @attention_head_outputs.postprocess
    def attention_head_outputs(self, value: Tensor) -> Tensor:
        return value.flatten(-2)
