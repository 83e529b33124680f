"""A gated DeltaNet mixer: linear attention with a recurrent state per head."""

from __future__ import annotations

from typing import Any, ClassVar

from nnterp import EProperty

from torch import Tensor

from ..layouts import Gates, LinearHeadOutputs, LinearQK, LinearV, State
from ..reasons import FRESH, HANDED_ON
from .mixer import RecurrentMixer


class LinearAttention(RecurrentMixer):
    """A gated DeltaNet mixer (Qwen3-Next, Qwen3.5, OLMo-Hybrid): linear attention with a recurrent state.

    For each token the state, one ``key_dim`` by ``value_dim`` matrix per head,
    decays by a learned gate (``decays``), takes up the token's key/value pair
    scaled by ``betas``, and the query reads against it. So the shared names
    mean what they mean on ``Attention`` (the contribution, the queries, keys
    and values the mixer receives, the per-head outputs) and there is no
    pattern; instead there are the gate, the write strength, and the state
    entering and leaving the call.

    Everything but ``attention_output`` is read at the delta-rule kernel call
    the forward makes (``kernel()``): the chunked rule on a prompt, the
    token-by-token rule on a decode step, where the sequence axis is 1 and
    ``state_input`` is the cached state.
    """

    CHUNK_KERNEL: ClassVar[str] = "torch_chunk_gated_delta_rule_0"
    RECURRENT_KERNEL: ClassVar[str] = "torch_recurrent_gated_delta_rule_0"
    STATE_OP: ClassVar[str | None] = "last_recurrent_state_3"
    RULE: ClassVar[str | None] = "gated_delta"
    #: whether the kernel L2-normalizes the queries and keys it receives (``use_qk_l2norm_in_kernel``) before
    #: scaling the queries by ``key_dim ** -0.5``; every transformers DeltaNet forward asks it to
    QK_L2_NORM: ClassVar[bool] = True

    @property
    def num_heads(self) -> int:
        """Value heads: one recurrent state each."""
        return self._module.num_v_heads

    @property
    def num_key_heads(self) -> int:
        """Query/key heads; each serves ``num_heads // num_key_heads`` consecutive value heads."""
        return self._module.num_k_heads

    @property
    def key_dim(self) -> int:
        """Width of one head's queries and keys."""
        return self._module.head_k_dim

    @property
    def value_dim(self) -> int:
        """Width of one head's values and outputs."""
        return self._module.head_v_dim

    @EProperty(RecurrentMixer.kernel_at("inputs"), "The queries the delta rule receives", select=0)
    def attention_queries(self, value: Tensor) -> LinearQK:
        """The queries the delta rule receives, ``[batch, seq, key_heads, key_dim]``: after the conv and the activation.

        Before the kernel's L2 norm and its 1/sqrt(key_dim) scale, which it
        applies itself. Assign or edit in place: the kernel reads what is written.
        """
        return value

    @EProperty(RecurrentMixer.kernel_at("inputs"), "The keys the delta rule receives", select=1)
    def attention_keys(self, value: Tensor) -> LinearQK:
        """The keys the delta rule receives, ``[batch, seq, key_heads, key_dim]``, before the kernel's L2 norm."""
        return value

    @EProperty(RecurrentMixer.kernel_at("inputs"), "The values the delta rule receives", select=2)
    def attention_values(self, value: Tensor) -> LinearV:
        """The values the delta rule receives, ``[batch, seq, heads, value_dim]``."""
        return value

    @EProperty(RecurrentMixer.kernel_at("inputs"), "The log of how much of the state each token keeps", select="g")
    def decays(self, value: Tensor) -> Gates:
        """The gate, ``[batch, seq, heads]``: the log of how much of the state each token keeps, float32, non-positive.

        The state is multiplied by ``exp(decays)`` before the token writes into it.
        """
        return value

    @EProperty(RecurrentMixer.kernel_at("inputs"), "How strongly each token writes into the state", select="beta")
    def betas(self, value: Tensor) -> Gates:
        """How strongly each token's key/value pair is written into the state, ``[batch, seq, heads]``, in (0, 1)."""
        return value

    @EProperty(
        RecurrentMixer.kernel_at("inputs"),
        "The state this call starts from",
        select="initial_state",
        none_when_fresh=FRESH,
    )
    def state_input(self, value: Any) -> State | None:
        """The state this call starts from, ``[batch, heads, key_dim, value_dim]``: None on a fresh prompt.

        A copy: the cache hands the kernel its own buffer and overwrites it in
        place with the step's new state, so the live tensor would read as this
        step's output by the time the trace ends. Assign to replace what the
        call starts from.
        """
        return None if value is None else value.clone()

    @EProperty(
        RecurrentMixer.kernel_at("output"), "The state after this call's last token", select=1, off_the_graph=HANDED_ON
    )
    def state_output(self, value: Any) -> State | None:
        """The state after this call's last token, ``[batch, heads, key_dim, value_dim]``: what the cache receives.

        None when the call keeps no cache (``use_cache=False``). Assigning it
        changes what the next decode step starts from, not this call's output.
        """
        return value

    @EProperty(RecurrentMixer.kernel_at("output"), "Each head's output, before the gated norm", select=0)
    def attention_head_outputs(self, value: Tensor) -> LinearHeadOutputs:
        """Each head's output, ``[batch, seq, heads, value_dim]``: the kernel's, before the gated norm and ``out_proj``."""
        return value
