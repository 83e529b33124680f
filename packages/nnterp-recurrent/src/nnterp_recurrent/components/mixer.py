"""The mechanism every recurrent mixer shares: which kernel call a forward makes, and the state after each token."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from nnsight.intervention.interleaver import Mediator
from nnterp import DerivedEProperty, EProperty, Standard
from nnterp.layouts import Residual

import torch
from greenlet import getcurrent
from torch import Tensor

from ..calls import per_call, pinned
from ..hub_kernels import seen_through
from ..layouts import State, States
from ..reasons import needs_recurrent_routing
from ..routing import calls, dispatcher, route_module


def _prompt_state(envoy: Any) -> str:
    return f"source.{envoy.CHUNK_KERNEL}.source.{envoy.KERNEL_BODY}.source.{envoy.STATE_OP}.output"


class RecurrentMixer(Standard):
    """A sequence mixer with a recurrent state, read at the kernel call its forward makes.

    A subclass names its kernel calls (``CHUNK_KERNEL`` for a prompt,
    ``RECURRENT_KERNEL`` for a decode step: operations of the forward's
    ``.source``) and the state's binding inside them (``STATE_OP``), and
    declares its values at ``kernel_at("inputs")`` / ``kernel_at("output")``.

    ``kernel()`` is the call that fires on this call of the module, decided
    once per call by the forward's own test (``continues``), so the same
    values work in a trace and at every step of ``tracer.iter``. The state
    after every token exists only in the token-by-token kernel: routing a
    family's prompts through it (``route_kernels(model.family, "torch")``) is
    the user's choice, as eager attention is.
    """

    lacks = "this block's mixer is recurrent: it has no softmax over keys"

    def __init__(self, module: Any, *args: Any, **kwargs: Any) -> None:
        # before nnsight instruments the forward: its kernel calls must be functions, not the kernels library's modules
        seen_through(module)
        super().__init__(module, *args, **kwargs)

    def _update(self, module: Any) -> None:
        seen_through(module)
        super()._update(module)

    # each a setting of the mixer kind (``LinearAttention``, ``StateSpace`` ...), set again where a family's forward
    # calls its kernels otherwise

    #: the call of the forward a prompt runs through (an operation of its ``.source``, dotted where nested): none here
    CHUNK_KERNEL: ClassVar[str] = ""
    #: the call each decode step of ``generate`` runs through: none here
    RECURRENT_KERNEL: ClassVar[str] = ""
    #: inside the token-by-token kernel, the binding of the state after each token's update; None (here) where the
    #: kernels never hold it
    STATE_OP: ClassVar[str | None] = None
    #: whether the kernel calls are functions of the modeling module that ``route_kernels`` rebinds: True here. A mixer
    #: whose recurrence is its forward's own code sets False (Lightning's, RG-LRU's): its ``CHUNK_KERNEL`` and
    #: ``RECURRENT_KERNEL`` then name its two paths, and ``kernel_names`` is empty
    ROUTED_KERNELS: ClassVar[bool] = True
    #: where the decode kernel is one state update rather than the token loop (Mamba-1): its new state's binding;
    #: the prompt's kernel is then itself the token loop, and each kernel name keeps its own function
    STEP_STATE_OP: ClassVar[str | None] = None
    #: inside a kernel call, the call of the function that does the work (a transformers dispatcher's ``implementation``)
    KERNEL_BODY: ClassVar[str] = "implementation_0"
    #: whether a call of several tokens over a cache continues from it (Mamba-1's scan starts every such call from zeros,
    #: so only its one-token decode steps continue)
    PROMPT_TAKES_STATE: ClassVar[bool] = True
    #: the keyword a kernel takes the state it starts from under
    INITIAL_STATE: ClassVar[str] = "initial_state"
    #: the recurrence the kit's state identities state for this mixer, by name (``nnterp_conformance.recurrences``):
    #: ``"selective_scan"`` (Mamba-1), ``"ssd"`` (Mamba-2), ``"gated_delta"`` (DeltaNet); None where the kit knows none
    RULE: ClassVar[str | None] = None

    def new_cache(self) -> Any:
        """A cache a caller continuing a prompt hands the prompt's call, or None where the model returns the cache it
        keeps (``output.cache``), as transformers' models do. A model that keeps its recurrent state on its modules and
        returns no cache (RecurrentGemma) continues a call handed one of the caller's making."""
        return None

    @property
    def skip_weights(self) -> Tensor | None:
        """``D``, what each token's value adds to its own output besides the state's read (``y = C . h + D * x``); None where there is none.

        Per channel on Mamba-1, per head on Mamba-2: the module's ``D``, which the forward hands the kernel.
        """
        return None

    @EProperty("output", "What the mixer adds to the residual stream")
    def attention_output(self, value: Tensor) -> Residual:
        """The mixer's contribution to the residual stream, ``[batch, seq, hidden_size]``: the module's output.

        ``layer_input + attention_output == layer_mid`` on a pre-norm block, as
        for softmax attention. In-place edits and assignment reach the model.
        """
        return value

    # -- which call fires ------------------------------------------------------------

    @classmethod
    def kernel_names(cls) -> tuple[str, ...]:
        """The modeling module's names the kernel calls go through (the operations without their ``_0``; of a dotted
        path, ``caller_0.source.kernel_0``, the last operation's); none where ``ROUTED_KERNELS`` is False."""
        if not cls.ROUTED_KERNELS:
            return ()
        return tuple(dict.fromkeys(_name(op) for op in (cls.CHUNK_KERNEL, cls.RECURRENT_KERNEL) if op))

    @classmethod
    def torch_kernels(cls, module: Any) -> dict[str, Any]:
        """What ``route_kernels(..., "torch")`` has each kernel's dispatcher call: the pure-torch function behind it."""
        bound = {name: _pure(getattr(module, name)) for name in cls.kernel_names()}
        if cls.STATE_OP is not None and cls.RECURRENT_KERNEL and cls.STEP_STATE_OP is None:
            # the state after every token lives in the token-by-token kernel: the prompt runs through it too
            token_loop = bound[_name(cls.RECURRENT_KERNEL)]
            bound = {name: token_loop for name in bound}
        return bound

    #: the range betas lie in: (0, 1) for a sigmoid, wider where a family scales it
    BETA_RANGE: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def route(self, mode: str) -> None:
        """``route_kernels`` for this mixer's modeling module: ``"torch"`` or ``"default"`` (process-wide)."""
        route_module(sys.modules[type(self._module).__module__], type(self), mode)

    @contextmanager
    def keeping_states(self) -> Iterator[None]:
        """Within it, this mixer's calls keep the state after every token; outside, what they did before.

        Routes the family's kernels token by token (``route("torch")``) and
        back. A mixer that keeps the states another way overrides it (a Mamba-2
        mixer shortens its chunks to one token). What the kit's recurrent checks use.
        """
        previous = self.routing()
        self.route("torch")
        try:
            yield
        finally:
            self.route(previous)

    def routing(self) -> str:
        """``"torch"`` when this family's prompts run through the pure-torch kernels ``route_kernels`` binds, else ``"default"``."""
        module = sys.modules[type(self._module).__module__]
        names = self.kernel_names()
        if names and all(calls(module, name) is function for name, function in self.torch_kernels(module).items()):
            return "torch"
        return "default"

    def arguments(self) -> tuple[tuple, dict]:
        """This call's ``(args, kwargs)``, read once per call at the module's input."""
        return per_call(self, "arguments", lambda: Mediator.value(f"{self.path}.input"))

    def continues(self) -> bool:
        """The forward's own test: one token over a cached state takes the decode kernel.

        Read from the call's arguments: a cache holding this layer's recurrent
        state, and a sequence axis of 1.
        """
        args, kwargs = self.arguments()
        hidden = args[0] if args else kwargs["hidden_states"]
        cache = kwargs.get("cache")
        if cache is None or hidden.shape[1] != 1:
            return False
        return cache.get_recurrent_state(self._module.layer_idx) is not None

    def kernel(self) -> str:
        """The kernel call that fires on this call of the mixer (``CHUNK_KERNEL`` or ``RECURRENT_KERNEL``).

        Outside a run (a value's path in ``support`` or a repr) it is the prompt's.
        """
        if getattr(getcurrent(), "mediator", None) is None:
            return self.CHUNK_KERNEL
        return per_call(self, "kernel", lambda: self.RECURRENT_KERNEL if self.continues() else self.CHUNK_KERNEL)

    @staticmethod
    def kernel_at(end: str) -> Any:
        """A key function: ``end`` (``"inputs"``, ``"output"``) of the kernel call this call makes."""
        return lambda envoy: f"source.{envoy.kernel()}.{end}"

    # -- the state after each token ----------------------------------------------------

    @EProperty(
        _prompt_state,
        "The state after a token of the prompt, one occurrence per token",
        unavailable=needs_recurrent_routing,
    )
    def state(self, value: Tensor) -> State:
        """The state after a token of the prompt, ``[batch, heads, key_dim, value_dim]``: one occurrence per token.

        A location inside the token-by-token kernel, walked with nnsight's own
        iteration: ``for t in tracer.iter[:]: mix.state`` reads the state after
        every token, ``tracer.iter[4]`` the one after token 4, and an
        assignment there is what the following tokens continue from. Outside
        ``tracer.iter`` a read is the state after token 0. Needs
        ``route_kernels(model.family, "torch")``.
        """
        return value

    def _length(self) -> int:
        args, kwargs = self.arguments()
        hidden = args[0] if args else kwargs["hidden_states"]
        return hidden.shape[1]

    def state_after(self, t: int) -> Tensor:
        """The state after token ``t`` of this call, ``[batch, heads, key_dim, value_dim]``."""
        self._before_pin()
        with pinned(self, t):
            return self.state

    def set_state_after(self, t: int, value: Tensor) -> None:
        """Assign the state after token ``t``: the tokens after it continue from ``value``.

        A write inside the prompt: read positions before ``t`` before it, and
        after it afterwards (``states`` only before).
        """
        self._before_pin()
        with pinned(self, t):
            self.state = value

    def _states(self) -> States:
        """The state after every token of this call, ``[batch, seq, heads, key_dim, value_dim]``.

        On a decode step, the step's one token: its ``state_output``.
        """
        if self.kernel() == self.RECURRENT_KERNEL:
            return self.state_output.unsqueeze(1)
        length = self._length()
        self._before_pin()
        found = []
        for t in range(length):
            with pinned(self, t):
                found.append(self.state.clone())
        return torch.stack(found, dim=1)

    states = DerivedEProperty(
        _states,
        description="The recurrent state after every token of this call; needs route_kernels(family, 'torch')",
        unavailable=needs_recurrent_routing,
    )

    def _before_pin(self) -> None:
        # What a pinned read must not do itself: check availability, record the call, and drill into the
        # kernels (a drill is a request too, and pinned to token t it would wait for the t-th kernel call).
        state = type(self).values()["state"]
        state._check(self)
        self.kernel()
        state._locate(self)


class TokenPinnedMixer(RecurrentMixer):
    """A recurrent mixer whose state after token ``t`` is the ``t``-th occurrence of the binding its loop keeps it in.

    The mechanism Mamba-1's scan (``SelectiveScan``), MiniMax's lightning
    attention (``LightningAttention``) and the RG-LRU (``RealGatedLRU``) share:
    a prompt runs a loop that binds the state after each token
    (``CHUNK_KERNEL``), a one-token call may instead run a single update that
    binds its new state once (``RECURRENT_KERNEL``), and ``state`` is read at
    the binding of the kernel this read is of. A subclass names only what
    differs: its kernels, where each binds the state (``_state_at``), and what
    a call of the single update is called (``ONE_UPDATE``).

    A token pin is not a call pin: pinned to occurrence ``t``, a read of the
    call's arguments would wait for call ``t``. So ``_at_token(t)`` records
    this call's kernel on the worker's mediator before it pins, and
    ``kernel()`` returns the record while the pin holds. A one-token update
    (``_one_update``) is the next occurrence of its binding, whatever call this
    is, so it is read unpinned, and only its token 0 exists. A read pinned by
    the user's own ``tracer.iter`` walks the prompt's loop.
    """

    #: what a call that runs the single update is called, in the error for a token of it other than 0
    ONE_UPDATE: ClassVar[str] = "a one-token call"

    def kernel(self) -> str:
        """The kernel call (or loop, or update) that fires on this call of the mixer; under a token pin, the one recorded before pinning."""
        held = _held(self)
        return held if held is not None else super().kernel()

    def _one_update(self) -> bool:
        """Whether this call's state after its one token is the single update's (``RECURRENT_KERNEL`` on one token).

        Mamba-1's and the RG-LRU's update only ever runs on one token; the
        lightning tokens' loop also runs a continuing call of several, which is
        walked pinned as a prompt's loop is.
        """
        return self.kernel() == self.RECURRENT_KERNEL and self._length() == 1

    @contextmanager
    def _at_token(self, t: int) -> Iterator[None]:
        """Within it, this worker's next read is of token ``t`` of this call, with the call's kernel held."""
        # A token pin is not a call pin: record this call's kernel first, so nothing under the pin asks for call t.
        self._before_pin()
        held = Mediator.current(self.path).__dict__.setdefault(TOKEN_KERNEL, {})
        held[self.path] = self.kernel()
        try:
            one_update = self._one_update()
            if one_update and t != 0:
                raise IndexError(f"token {t} of {self.ONE_UPDATE}, which has one token (0)")
            # a one-token update is the next occurrence of its binding, whatever call this is
            with pinned(self, None if one_update else t):
                yield
        finally:
            # released on an error too: a later read in the trace is not of this call's held kernel
            held.pop(self.path, None)

    def _state_key(self) -> str:
        """Where ``state`` is read: the binding ``_state_at`` names for the kernel this read is of."""
        kernel = _held(self)
        if kernel is None:
            mediator = _mediator()
            # pinned by the user's tracer.iter: a walk over the prompt's loop, which is where the states are bound
            kernel = self.CHUNK_KERNEL if mediator is not None and mediator.iteration else self.kernel()
        return self._state_at(kernel)

    def _state_at(self, kernel: str) -> str:
        """The location of the state after a token under ``kernel`` (``CHUNK_KERNEL`` or ``RECURRENT_KERNEL``)."""
        raise NotImplementedError(f"{type(self).__name__} names where its state is bound (_state_at)")

    def state_after(self, t: int) -> Tensor:
        """The state after token ``t`` of this call, laid out as ``state`` is.

        ``[batch, channels, state_dim]`` on Mamba-1's scan, ``[batch, heads,
        head_dim, head_dim]`` on lightning attention, ``[batch, channels]`` on
        the RG-LRU.
        """
        with self._at_token(t):
            return self.state

    def set_state_after(self, t: int, value: Tensor) -> None:
        """Assign the state after token ``t``: the tokens after it continue from ``value``.

        A write inside the loop: read positions before ``t`` before it, and
        after it afterwards (``states`` only before).
        """
        with self._at_token(t):
            self.state = value

    def _token_states(self) -> Tensor:
        """``state_after(t)`` for every token of this call, stacked on a sequence axis after the batch's."""
        return torch.stack([self.state_after(t).clone() for t in range(self._length())], dim=1)


#: on a worker's mediator: the kernel each mixer's call recorded before a token pin, by the mixer's path
TOKEN_KERNEL = "_nnterp_token_kernel"


def _held(envoy: Any) -> str | None:
    """The kernel recorded for a read pinned to a token of this call, or None outside such a read."""
    mediator = _mediator()
    if mediator is None:
        return None
    return mediator.__dict__.get(TOKEN_KERNEL, {}).get(envoy.path)


def _mediator() -> Any:
    """The running worker's mediator, or None outside a run."""
    found = getattr(getcurrent(), "mediator", None)
    return None if found is None else found()


def _name(op: str) -> str:
    """The modeling module's name an operation calls: ``mamba_selective_scan`` of ``mamba_scan_forward_0.source.mamba_selective_scan_0``."""
    return op.rsplit(".", 1)[-1].rsplit("_", 1)[0]


def _pure(function: Any) -> Any:
    """The pure-torch function behind a kernel dispatcher (``functools.wraps`` keeps it as ``__wrapped__``)."""
    function = dispatcher(function)
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    return function
