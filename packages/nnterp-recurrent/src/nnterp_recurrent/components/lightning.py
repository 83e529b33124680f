"""MiniMax's lightning attention: linear attention whose state decays at a fixed rate per head, run in the forward's own loops."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from nnterp import DerivedEProperty, EProperty

from greenlet import getcurrent
from torch import Tensor

from ..layouts import Gates, LinearHeadOutputs, LinearQK, LinearV, State, States
from ..reasons import FRESH, HANDED_ON
from .mixer import RecurrentMixer, TokenPinnedMixer

#: the block size a mixer was built with, kept on the module while blocks_per_token has it at 1
BUILT = "_nnterp_block_size"


def needs_token_blocks(envoy: Any) -> str | None:
    """Why the state after each token of a prompt is unavailable: the prompt's loop runs over blocks of several tokens."""
    size = envoy._module.block_size
    if size == 1:
        return None
    return (
        f"a prompt's loop carries the state from block to block of {size} tokens (the config's block_size) and holds "
        "it only at their boundaries; call nnterp_recurrent.blocks_per_token(model) before tracing, or read inside "
        "mixer.keeping_states(), so every token is a block (quadratic in blocks: slower on long prompts)"
    )


def _op(name: str) -> Any:
    """A key function: the output of the forward's binding ``name`` names (a class variable), once the call's loop is known.

    Every value asks which loop runs first (``kernel()``), so the call's arguments are read at its input, before any
    value inside it is waited for.
    """

    def key(envoy: LightningAttention) -> str:
        envoy.kernel()
        return f"source.{getattr(envoy, name)}.output"

    return key


class LightningAttention(TokenPinnedMixer):
    """MiniMax's lightning attention: linear attention whose state decays by a fixed rate per head.

    Each head keeps a ``head_dim`` by ``head_dim`` state ``S``; per token::

        S_t = exp(-slope) * S_{t-1} + k_t^T v_t
        o_t = q_t S_t

    with ``q``, ``k``, ``v`` the activated projections (no norm, no scale),
    ``slope`` a per-head, per-layer constant (the module's ``slope_rate``
    buffer). The outputs are joined, RMS-normed, gated by
    ``sigmoid(output_gate(x))`` and projected by ``out_proj``.

    There is no kernel call: the forward runs the recurrence in its own
    loops. A call that starts from no cached state loops over blocks of
    ``block_size`` tokens (the state kept at each block's end); a call over a
    cache holding the layer's state, one token or several, loops token by
    token. So ``kernel()`` names the loop that runs (``CHUNK_KERNEL``, the
    blocks; ``RECURRENT_KERNEL``, the tokens) and each value is a binding of
    the forward. There is no write strength (``betas``): every token writes
    its full ``k^T v``.
    """

    #: the loop a call with no cached state runs: blocks of block_size tokens
    CHUNK_KERNEL: ClassVar[str] = "blocks"
    #: the loop a call over a cached state runs: one token at a time
    RECURRENT_KERNEL: ClassVar[str] = "tokens"
    RULE: ClassVar[str | None] = "lightning"
    #: the forward's binding the queries are read at
    QUERIES: ClassVar[str] = "query_states_0"
    #: the forward's binding the keys are read at
    KEYS: ClassVar[str] = "key_states_0"
    #: the forward's binding the values are read at
    VALUES: ClassVar[str] = "value_states_0"
    #: ``attn_weights_inter = None``, the first binding: what a call with no cached state starts from
    FRESH_STATE: ClassVar[str] = "attn_weights_inter_0"
    #: ``attn_weights_inter = cache.get_linear_cache(...)``: the cached state a continuing call starts from
    CACHED_STATE: ClassVar[str] = "attn_weights_inter_1"
    #: the state after each block of the blocks' loop
    BLOCK_STATE: ClassVar[str] = "attn_weights_inter_3"
    #: the state after each token of the tokens' loop
    TOKEN_STATE: ClassVar[str] = "attn_weights_inter_4"
    #: ``torch.cat`` of the loops' outputs: every head's output, [batch, heads, seq, head_dim]
    HEAD_OUTPUTS: ClassVar[str] = "attn_output_2"
    #: the call handing the last state to the cache
    HAND_ON: ClassVar[str] = "cache_set_linear_cache_0"
    #: the recurrence is the forward's own code, with no kernel to route
    ROUTED_KERNELS = False

    @property
    def num_heads(self) -> int:
        """Heads: one state each."""
        return self._module.num_attention_heads

    @property
    def num_key_heads(self) -> int:
        """Query/key heads: one per head."""
        return self._module.num_attention_heads

    @property
    def key_dim(self) -> int:
        """Width of one head's queries and keys."""
        return self._module.head_dim

    @property
    def value_dim(self) -> int:
        """Width of one head's values and outputs."""
        return self._module.head_dim

    # -- which loop runs ------------------------------------------------------------------

    def _cache(self) -> Any:
        if getattr(getcurrent(), "mediator", None) is None:
            return None  # outside a run (a value's path in support or a repr): a call that keeps none
        _, kwargs = self.arguments()
        return kwargs.get("cache")

    def caches(self) -> bool:
        """Whether this call keeps a cache, so it hands its last state on."""
        return self._cache() is not None

    def continues(self) -> bool:
        """The forward's own test: a cache holding this layer's state makes the call loop token by token, whatever its length."""
        cache = self._cache()
        return cache is not None and cache.get_linear_cache(self._module.layer_idx) is not None

    def decoding(self) -> bool:
        """Whether this call continues a cached state (the tokens' loop)."""
        return self.kernel() == self.RECURRENT_KERNEL

    @contextmanager
    def keeping_states(self) -> Iterator[None]:
        """Within it, this model's lightning mixers run blocks of one token, so a prompt keeps every token's state."""
        sizes = blocks_per_token(self.root)
        try:
            yield
        finally:
            for module, size in sizes:
                module.block_size = size
                module.__dict__.pop(BUILT, None)

    #: the module returns (output, last state): the contribution is the first
    attention_output = RecurrentMixer.attention_output.at("output", select=0)

    # -- what the loops read -------------------------------------------------------------

    @EProperty(_op("QUERIES"), "The queries that read the state")
    def attention_queries(self, value: Tensor) -> LinearQK:
        """The queries, ``[batch, seq, heads, head_dim]``: ``act_fn(qkv_proj(x))``'s first third, as the loops read them.

        No norm and no scale: ``o_t = q_t S_t``. A view of the forward's
        tensor: in-place edits and assignment reach the loops.
        """
        return value.transpose(1, 2)

    @EProperty(_op("KEYS"), "The keys each token writes into the state with")
    def attention_keys(self, value: Tensor) -> LinearQK:
        """The keys, ``[batch, seq, heads, head_dim]``: each token adds ``k^T v`` to its head's state."""
        return value.transpose(1, 2)

    @EProperty(_op("VALUES"), "The values each token writes into the state")
    def attention_values(self, value: Tensor) -> LinearV:
        """The values, ``[batch, seq, heads, head_dim]``: what each token writes into the state."""
        return value.transpose(1, 2)

    @attention_queries.postprocess
    def attention_queries(self, value: Tensor) -> Tensor:
        return value.transpose(1, 2)

    attention_keys.postprocess(attention_queries._postprocess)
    attention_values.postprocess(attention_queries._postprocess)

    def _decays(self) -> Gates:
        """``-slope_rate``, ``[batch, seq, heads]``: the log of how much of the state each token keeps; float32, negative.

        A constant per head and layer (the module's ``slope_rate`` buffer,
        which the blocks' loop also holds as its precomputed decay buffers),
        served per token for the shared layout; derived, read-only.
        """
        args, kwargs = self.arguments()
        hidden = args[0] if args else kwargs["hidden_states"]
        rates = self._module.slope_rate.float().reshape(-1)
        return (-rates).expand(hidden.shape[0], hidden.shape[1], rates.shape[0])

    decays = DerivedEProperty(
        _decays, description="The log decay -slope_rate of each head's state, per token; derived, read-only"
    )

    @EProperty(
        lambda e: f"source.{e.CACHED_STATE if e.decoding() else e.FRESH_STATE}.output",
        "The state this call starts from",
        none_when_fresh=FRESH,
    )
    def state_input(self, value: Any) -> State | None:
        """The state this call starts from, ``[batch, heads, head_dim, head_dim]``: None on a call with no cached state.

        The cache's state on a call that continues it (a copy). Assign, on
        such a call, to replace what it starts from.
        """
        return None if value is None else value.clone()

    @state_input.postprocess
    def state_input(self, value: Tensor) -> Tensor:
        if not self.decoding():
            raise ValueError(
                "this call starts from no cached state and runs its blocks' loop from zeros; assign state_input on a "
                "call over a cache holding this layer's state, or set_state_after(t, ...) inside the prompt"
            )
        return value

    # -- what they leave -----------------------------------------------------------------

    @EProperty(
        lambda e: f"source.{e.HAND_ON}.inputs" if e.caches() else "output",
        "The state after this call's last token",
        off_the_graph=HANDED_ON,
    )
    def state_output(self, value: Any) -> State | None:
        """The state after this call's last token, ``[batch, heads, head_dim, head_dim]``: what the cache receives.

        Read where the forward hands it to ``cache.set_linear_cache``; None
        when the call keeps no cache (``use_cache=False``). Assigning it
        changes what the next call starts from, not this call's output.
        """
        if not self.caches():
            return None
        args, _ = value
        return args[1]

    @state_output.postprocess
    def state_output(self, value: Tensor) -> Any:
        if not self.caches():
            raise ValueError("this call keeps no cache (use_cache=False): there is no state it hands on to write")
        return (self._module.layer_idx, value), {}

    @EProperty(_op("HEAD_OUTPUTS"), "Each head's output, before the norm, the gate and out_proj")
    def attention_head_outputs(self, value: Tensor) -> LinearHeadOutputs:
        """Each head's output ``o_t = q_t S_t``, ``[batch, seq, heads, head_dim]``: the loops' joined outputs, before the
        RMS norm, the ``sigmoid(output_gate(x))`` gate and ``out_proj``. A view: edits and assignment reach the norm."""
        return value.transpose(1, 2)

    attention_head_outputs.postprocess(attention_queries._postprocess)

    # A transposed view the forward never reads afterwards: the loops (and the norm, for the heads) go on with the
    # tensor it was taken from, so no gradient would reach it. The view laid back out is what the forward goes on
    # with: the same storage and numbers (an in-place edit lands either way), and a backward now reaches the served view.
    for _value in (attention_queries, attention_keys, attention_values, attention_head_outputs):
        _value.transform(lambda envoy, view, served: view.transpose(1, 2))
    del _value

    # -- the state after each token ------------------------------------------------------

    def _state_at(self, kernel: str) -> str:
        return f"source.{self.TOKEN_STATE if kernel == self.RECURRENT_KERNEL else self.BLOCK_STATE}.output"

    @EProperty(
        TokenPinnedMixer._state_key, "The state after a token, one occurrence per token", unavailable=needs_token_blocks
    )
    def state(self, value: Tensor) -> State:
        """The state after a token, ``[batch, heads, head_dim, head_dim]``: one occurrence per token of the loop.

        Walked with nnsight's iteration (``for t in tracer.iter[:]``) or
        ``state_after(t)``; an assignment is what the later tokens continue
        from. In the tokens' loop the token's own output reads the state after
        its update; in the blocks' loop (one token a block) it was computed
        before, so a write reaches the tokens after ``t``. Needs
        ``blocks_per_token(model)`` on a prompt.
        """
        return value

    def _states(self) -> States:
        """The state after every token of this call, ``[batch, seq, heads, head_dim, head_dim]``: each loop's own."""
        return self._token_states()

    states = DerivedEProperty(
        _states,
        description="The state after every token of this call; needs nnterp_recurrent.blocks_per_token(model) on a prompt",
        unavailable=needs_token_blocks,
    )


def blocks_per_token(model: Any, enabled: bool = True) -> list[tuple[Any, int]]:
    """Run every lightning mixer of ``model`` with blocks of one token, so a prompt's loop keeps every token's state.

    The outputs are the same (the decay buffers are sliced to the block a
    call runs), the cost is not: the loop runs once per token. Returns each
    mixer module and the block size it had; ``enabled=False`` restores the
    size each was built with.
    """
    if not getattr(model, "dispatched", True):
        model.dispatch()
    found = []
    for layer in range(model.num_layers):
        mixer = model.layers[layer].__dict__.get("linear_attn")
        if not isinstance(mixer, LightningAttention):
            continue
        module = mixer._module
        found.append((module, module.block_size))
        if enabled:
            module.__dict__.setdefault(BUILT, module.block_size)
            module.block_size = 1
        else:
            module.block_size = module.__dict__.pop(BUILT, module.block_size)
    return found
