"""RecurrentGemma's recurrent block (Griffin's): a real-gated linear recurrent unit (RG-LRU), one number of state per channel."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from nnterp import DerivedEProperty, EProperty
from nnterp.layouts import BATCH, SEQ, declare

import torch
from jaxtyping import Float
from torch import Tensor

from ..layouts import CHANNELS, ScanValues
from ..reasons import FRESH
from .mixer import RecurrentMixer, TokenPinnedMixer

#: the recurrent state: one number per channel
LruState = Float[Tensor, f"{BATCH} {CHANNELS}"]
LruStates = Float[Tensor, f"{BATCH} {SEQ} {CHANNELS}"]
#: one number per token and channel: a gate, a log decay
LruGates = Float[Tensor, f"{BATCH} {SEQ} {CHANNELS}"]
declare(dict(globals()))


def _op(path: str) -> Any:
    """A key function: ``path`` below the mixer, once the call's arguments are recorded (read at the block's input,
    before any value inside it is waited for)."""

    def key(envoy: RealGatedLRU) -> str:
        envoy.kernel()
        return path.format(lru=envoy.LRU, scan=envoy.SCAN)

    return key


class RealGatedLRU(TokenPinnedMixer):
    """RecurrentGemma's recurrent block: a short conv, then a real-gated linear recurrence per channel, gated by a GeLU branch.

    Per token and channel of the recurrence's width (``lru_width``)::

        a_t = exp(-8 * r_t * softplus(L))              r_t = sigmoid(W_a x_t + b_a)
        i_t = sigmoid(W_x x_t + b_x)
        h_t = a_t * h_{t-1} + sqrt(1 - a_t^2) * (i_t * x_t)
        y_t = h_t

    with ``x`` the conv's output; ``y`` is multiplied by ``gelu(linear_y(input))``
    and projected by ``linear_out``. Where a sequence starts (``position_ids
    == 0``) the recurrence resets: ``a`` is 0 and the input is not scaled.

    In the shared names: ``attention_values`` is what each token writes, the
    gated and normalized input ``sqrt(1 - a^2) * i * x``; ``decays`` the log
    of ``a`` as the recurrence applies it (after the reset); the state is
    ``h`` and ``attention_head_outputs`` is ``y``, the state itself. There are
    no queries, keys or betas; the input gate is ``input_gates``, its own name.

    No kernel: the recurrence is ``rg_lru._rnn_scan``'s Python loop on a call
    of several tokens (``CHUNK_KERNEL``, the state after every token bound in
    it) and one update on a call of one (``RECURRENT_KERNEL``). The state
    lives on the module (``rg_lru.recurrent_states``), not in a cache: a call
    handed a cache continues whatever the module holds, a call without one
    resets it, and the model returns no cache, so a caller continuing a prompt
    hands its first call one of its own making (``new_cache``).
    """

    CHUNK_KERNEL: ClassVar[str] = "scan"
    RECURRENT_KERNEL: ClassVar[str] = "step"
    RULE: ClassVar[str | None] = "rg_lru"
    #: a call of several tokens runs its conv from zeros (only a one-token step continues the conv window), so only
    #: one-token calls continue a prompt, though the recurrence itself continues from the module's state
    PROMPT_TAKES_STATE: ClassVar[bool] = False
    #: the recurrence's module
    LRU: ClassVar[str] = "rg_lru"
    #: the scan's call inside the recurrence module's forward
    SCAN: ClassVar[str] = "self__rnn_scan_0"
    #: inside the scan's loop, the binding of the state after each token
    STATE_OP: ClassVar[str | None] = "recurrent_states_2"
    #: the recurrence is the module's own code, with no kernel to route
    ROUTED_KERNELS = False

    @property
    def channels(self) -> int:
        """The recurrence's width (``lru_width``): one number of state per channel."""
        return self._module.lru_width

    @contextmanager
    def keeping_states(self) -> Iterator[None]:
        """Nothing to change: the scan's loop keeps the state after every token of a prompt."""
        yield

    def new_cache(self) -> Any:
        """A cache for a caller continuing a prompt to hand its first call: the model keeps the recurrent state on its
        modules and returns no cache, and a call handed none resets them; the attention blocks keep their keys and
        values in it."""
        from transformers import DynamicCache

        return DynamicCache(config=self.root._module.config)

    # -- which update runs -----------------------------------------------------------

    def continues(self) -> bool:
        """The scan's own test: a call of one token takes the single update, whatever state it starts from."""
        return self._length() == 1

    def fresh(self) -> bool:
        """Whether the call's first token starts a sequence (``position_ids`` 0), where the recurrence resets."""
        args, kwargs = self.arguments()
        positions = kwargs["position_ids"] if "position_ids" in kwargs else args[1]
        return bool((positions[:, 0] == 0).all())

    def caches(self) -> bool:
        """Whether the call keeps its state for the next (``use_cache``)."""
        _, kwargs = self.arguments()
        return bool(kwargs.get("use_cache"))

    # -- what the recurrence reads ---------------------------------------------------

    @EProperty(
        _op("{lru}.source.normalized_x_0.output"), "What each token writes into the state: the gated, normalized input"
    )
    def attention_values(self, value: Tensor) -> ScanValues:
        """What each token writes, ``[batch, seq, channels]``: ``sqrt(1 - a^2) * i * x`` (``i * x`` where the sequence starts).

        The conv's output gated by ``input_gates`` and normalized, as the scan
        receives it. In-place edits and assignment reach the scan.
        """
        return value

    @EProperty(
        _op("{lru}.source.input_gate_0.output"), "The input gate: how much of each channel's input enters the write"
    )
    def input_gates(self, value: Tensor) -> LruGates:
        """The input gate ``i = sigmoid(W_x x + b_x)``, ``[batch, seq, channels]``, in (0, 1).

        ``attention_values = sqrt(1 - a^2) * input_gates * x``, ``x`` the
        conv's output. In-place edits and assignment reach the write.
        """
        return value

    @EProperty(
        _op("{lru}.source.{scan}.source.recurrent_gate_0.output"), "The log of how much of the state each token keeps"
    )
    def decays(self, value: Tensor) -> LruGates:
        """``log a``, ``[batch, seq, channels]``: the log of how much of the state each token keeps, non-positive.

        Read as the scan applies it, after the reset: ``-inf`` where a sequence
        starts (nothing kept). The state is multiplied by ``exp(decays)``
        before the token writes. An assignment, or an in-place edit of the
        log, is laid back as ``exp`` of it; an unedited read hands the scan its
        own gate bit for bit, differentiated through the served log, so a
        backward reaches it (``decays.grad`` is the metric's derivative).
        """
        kept = value > 0
        # log(0) is -inf as value.log() serves it, but with no 0/0 in its backward (a NaN upstream of the reset)
        served = torch.where(kept, torch.where(kept, value, torch.ones_like(value)).log(), float("-inf"))
        served._nnterp_unedited = served.detach().clone()
        return served

    @decays.postprocess
    def decays(self, value: Tensor) -> Tensor:
        return value.exp()

    @decays.transform
    def decays(self, view: Tensor, served: Tensor) -> Tensor:
        # the scan multiplies by the gate, not its log: the log the user holds is not what it computes with
        unedited = getattr(view, "_nnterp_unedited", None)
        if unedited is None or not torch.equal(view, unedited):
            return view.exp().to(served.dtype)
        if not (torch.is_grad_enabled() and view.requires_grad):
            return served
        through = view.exp().to(served.dtype)
        return served.detach() + (through - through.detach())

    @EProperty(_op("{lru}.source.{scan}.inputs"), "The state this call starts from", none_when_fresh=FRESH)
    def state_input(self, value: Any) -> LruState | None:
        """The state this call starts from, ``[batch, channels]``, float32: None where the sequence starts (it resets).

        The module's ``recurrent_states`` as the scan receives it (a copy).
        Assign to replace what the call starts from.
        """
        if self.fresh():
            return None
        _, kwargs = value
        state = kwargs.get("recurrent_states")
        return None if state is None else state.clone()

    @state_input.postprocess
    def state_input(self, value: Tensor) -> Any:
        if self.fresh():
            raise ValueError("this call starts a sequence (position 0), where the recurrence resets: it takes no state")
        args, kwargs = _SCAN_INPUTS.__get__(self)
        return args, {**kwargs, "recurrent_states": value}

    # -- what it leaves --------------------------------------------------------------

    @EProperty(_op("{lru}.source.{scan}.output"), "The state after this call's last token")
    def state_output(self, value: Any) -> LruState | None:
        """The state after this call's last token, ``[batch, channels]``, float32: what the module keeps for the next call.

        None when the call keeps nothing (``use_cache=False``). Assigning it
        changes what the next call starts from, not this call's output.
        """
        return value[1] if self.caches() else None

    @state_output.postprocess
    def state_output(self, value: Tensor) -> Any:
        if not self.caches():
            raise ValueError("this call keeps no state (use_cache=False): there is no state it hands on to write")
        return _SCAN_OUTPUT.__get__(self)[0], value

    @EProperty(_op("{lru}.source.{scan}.output"), "The recurrence's output, before the GeLU branch's gate")
    def attention_head_outputs(self, value: Any) -> ScanValues:
        """The recurrence's output ``y_t = h_t``, ``[batch, seq, channels]``: before the ``gelu(linear_y(x))`` gate and ``linear_out``."""
        return value[0]

    @attention_head_outputs.postprocess
    def attention_head_outputs(self, value: Tensor) -> Any:
        return value, _SCAN_OUTPUT.__get__(self)[1]

    #: the block returns (output, None): the contribution is the first
    attention_output = RecurrentMixer.attention_output.at("output", select=0)

    # -- the state after each token ------------------------------------------------------

    def _state_at(self, kernel: str) -> str:
        if kernel == self.RECURRENT_KERNEL:
            return f"{self.LRU}.source.{self.SCAN}.output"
        return f"{self.LRU}.source.{self.SCAN}.source.{self.STATE_OP}.output"

    @EProperty(TokenPinnedMixer._state_key, "The state after a token, one occurrence per token")
    def state(self, value: Any) -> LruState:
        """The state after a token, ``[batch, channels]``, float32: one occurrence per token of the scan's loop.

        Walked with ``tracer.iter`` or ``state_after(t)``; an assignment in
        the loop is what the later tokens continue from (and token ``t``'s own
        output). On a one-token call, the update's new state, which the module
        keeps for the next call.
        """
        return value[1] if isinstance(value, tuple) else value

    @state.postprocess
    def state(self, value: Tensor) -> Any:
        if self.kernel() == self.RECURRENT_KERNEL:
            return _SCAN_OUTPUT.__get__(self)[0], value
        return value

    states = DerivedEProperty(
        RecurrentMixer._states,
        description="The state after every token of this call: the scan's loop keeps it, no routing needed",
    )


def _detached(key: Any, name: str) -> EProperty:
    # a location a value's write-back reads whole, not itself a standard value
    found = EProperty(key)
    found.name = name
    return found


_SCAN_INPUTS = _detached(_op("{lru}.source.{scan}.inputs"), "scan inputs")
_SCAN_OUTPUT = _detached(_op("{lru}.source.{scan}.output"), "scan output")
