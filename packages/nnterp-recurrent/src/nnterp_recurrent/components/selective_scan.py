"""A Mamba-1 mixer: a selective state-space scan, one state vector per channel."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Literal, overload

from nnsight.intervention.interleaver import Mediator
from nnterp import DerivedEProperty, EProperty

import torch.nn.functional as F
from torch import Tensor

from ..calls import per_call
from ..layouts import ScanDecays, ScanQK, ScanState, ScanStates, ScanSteps, ScanValues
from ..reasons import FRESH, needs_torch_kernels
from .mixer import RecurrentMixer, TokenPinnedMixer


def needs_token_loop(envoy: Any) -> str | None:
    """Why the state after each token is unavailable: the kernels are not routed, or the scan runs mambapy's parallel scan."""
    reason = needs_torch_kernels(envoy)
    if reason is not None:
        return reason
    if envoy.parallel_scan():
        return (
            "this mixer runs mambapy's parallel scan (config.use_mambapy), which holds every state at once rather "
            "than in a token loop; set use_mambapy = False on the mixer module, or read the states inside "
            "mixer.keeping_states()"
        )
    return None


class SelectiveScan(TokenPinnedMixer):
    """A Mamba-1 mixer (Mamba, Falcon-Mamba, Jamba's Mamba blocks): a selective state-space scan.

    Each channel of the inner width carries a state of ``state_dim`` numbers.
    Per token, the mixer makes a step size per channel
    ``dt = softplus(dt_proj(x) + dt_bias)`` and two vectors B and C shared by
    every channel, and runs, per channel::

        h_t = exp(dt_t * A) * h_{t-1} + dt_t * B_t * x_t
        y_t = C_t . h_t + D * x_t

    with ``A`` a learned ``[channels, state_dim]`` matrix of negative rates;
    ``y`` is gated by ``silu(z)`` and projected back by ``out_proj``. In the
    shared vocabulary C reads the state as a query does, B writes into it as
    a key does, x is what gets written (the values), dt is how strongly each
    token writes (``betas``) and ``dt * A`` the log of how much of the state
    each token keeps (``decays``, per channel and state dimension).

    The values are read at the kernel call the forward's ``mamba_scan_forward`` makes:
    ``mamba_selective_scan(x, dt, A, B, C, D=, z=, delta_bias=, ...)`` on a
    prompt, ``mamba_selective_state_update(state, x, dt, A, B, C, D, z=,
    dt_bias=, ...)`` on a decode step. The kernel's tensors are channel-first
    (x and dt ``[batch, channels, seq]``, B and C ``[batch, state_dim, seq]``,
    the sequence axis dropped on a decode step); each value is a view of its
    argument laid out tokens first, and an assignment is laid back out, so
    reads, writes and in-place edits all reach the kernel.

    The pure-torch selective scan is itself the token loop (``STATE_OP``), and
    the decode kernel a single update (``STEP_STATE_OP``), so routing binds each
    kernel name to its own pure-torch function.
    """

    # one level down since transformers 5.25: the forward calls mamba_scan_forward, which calls the kernels
    CHUNK_KERNEL: ClassVar[str] = "mamba_scan_forward_0.source.mamba_selective_scan_0"
    RECURRENT_KERNEL: ClassVar[str] = "mamba_scan_forward_0.source.mamba_selective_state_update_0"
    #: inside the scan's token loop, the binding of the state after each token's update
    STATE_OP: ClassVar[str | None] = "ssm_state_3"
    #: inside the decode kernel, the binding of the updated state
    STEP_STATE_OP: ClassVar[str] = "ssm_state_0"
    #: inside the decode kernel, the updated state cast as the kernel copies it into the cache
    STEP_CACHE_OP: ClassVar[str] = "ssm_state_to_0"
    #: y = C . h + D * x, before the gate: in the scan, and in the decode kernel
    OUTPUT_OPS: ClassVar[tuple[str, str]] = ("scan_output_5", "out_1")
    #: each argument of the two kernels: (position or keyword in the scan, in the decode update)
    ARGUMENTS: ClassVar[dict[str, tuple[int | str, int | str]]] = {
        "x": (0, 1),
        "dt": (1, 2),
        "A": (2, 3),
        "B": (3, 4),
        "C": (4, 5),
        "dt_bias": ("delta_bias", "dt_bias"),
    }
    #: whether a call of several tokens over a cache starts from the cached state: transformers' Mamba-1 scan
    #: takes no initial state and starts from zeros, so only a decode step (one token) continues the cache
    PROMPT_TAKES_STATE: ClassVar[bool] = False
    #: softplus: any positive step size
    BETA_RANGE: ClassVar[tuple[float, float]] = (0.0, float("inf"))
    RULE: ClassVar[str | None] = "selective_scan"
    ONE_UPDATE: ClassVar[str] = "a decode step"

    @property
    def skip_weights(self) -> Tensor:
        """``D``, ``[channels]``: ``y = C . h + D * x``."""
        return self._module.D

    @property
    def channels(self) -> int:
        """The mixer's inner width: each channel carries its own state."""
        return self._module.intermediate_size

    @property
    def state_dim(self) -> int:
        """The width of one channel's state, and of B and C."""
        return self._module.ssm_state_size

    @property
    def num_groups(self) -> int:
        """Channel groups sharing one B and C: one, every channel reads the same."""
        return 1

    # -- which call fires, and where its values are -----------------------------------

    def decoding(self) -> bool:
        """Whether this call is a decode step: one token over a cached state, through the single update."""
        return self.kernel() == self.RECURRENT_KERNEL

    # the tensors are passed by position, dt's bias by keyword (as ``ARGUMENTS`` holds them)
    @overload
    def _position(self, name: Literal["x", "dt", "A", "B", "C"]) -> int: ...
    @overload
    def _position(self, name: Literal["dt_bias"]) -> str: ...
    def _position(self, name: str) -> int | str:
        return self.ARGUMENTS[name][self.decoding()]

    def _inside(self, op: str) -> str:
        return f"source.{self.kernel()}.source.{self.KERNEL_BODY}.source.{op}.output"

    def caches(self) -> bool:
        """Whether this call keeps a cache, so the scan returns its last state (the forward's ``output_final_state``)."""
        _, kwargs = self.arguments()
        return kwargs.get("cache") is not None

    def parallel_scan(self) -> bool:
        """Whether the scan runs mambapy's parallel scan instead of the token loop."""
        if not getattr(self._module, "use_mambapy", False):
            return False
        module = sys.modules[type(self._module).__module__]
        return getattr(module, "is_mambapy_available", lambda: False)()

    @contextmanager
    def keeping_states(self) -> Iterator[None]:
        """Within it, this mixer's scan runs the pure-torch token loop, which keeps the state after every token."""
        parallel = getattr(self._module, "use_mambapy", None)
        if parallel:
            self._module.use_mambapy = False
        try:
            with super().keeping_states():
                yield
        finally:
            if parallel:
                self._module.use_mambapy = parallel

    def kernel_inputs(self) -> tuple[tuple, dict]:
        """This call's kernel ``(args, kwargs)``, read once per call."""
        return per_call(self, "kernel_inputs", lambda: Mediator.value(f"{_operation(self, self.kernel()).path}.input"))

    # -- what the kernel receives ------------------------------------------------------

    @EProperty(
        RecurrentMixer.kernel_at("inputs"),
        "C: what reads the state, as a query does",
        select=lambda e: e._position("C"),
    )
    def attention_queries(self, value: Tensor) -> ScanQK:
        """C, ``[batch, seq, 1, state_dim]`` (one group): what each token's output reads the state with, ``y = C . h``.

        A view of the kernel's channel-first argument: in-place edits and
        assignment reach the scan.
        """
        return _tokens_first(self, value, vector=True)

    @attention_queries.postprocess
    def attention_queries(self, value: Tensor) -> Tensor:
        return _kernel_layout(self, value, vector=True)

    @EProperty(
        RecurrentMixer.kernel_at("inputs"),
        "B: what writes the input into the state, as a key does",
        select=lambda e: e._position("B"),
    )
    def attention_keys(self, value: Tensor) -> ScanQK:
        """B, ``[batch, seq, 1, state_dim]`` (one group): how each token's input is written into the state."""
        return _tokens_first(self, value, vector=True)

    @attention_keys.postprocess
    def attention_keys(self, value: Tensor) -> Tensor:
        return _kernel_layout(self, value, vector=True)

    @EProperty(
        RecurrentMixer.kernel_at("inputs"), "x: what is written into the state", select=lambda e: e._position("x")
    )
    def attention_values(self, value: Tensor) -> ScanValues:
        """x, ``[batch, seq, channels]``: the scan's input after the conv and its activation, what each channel writes."""
        return _tokens_first(self, value)

    @attention_values.postprocess
    def attention_values(self, value: Tensor) -> Tensor:
        return _kernel_layout(self, value)

    def _betas(self) -> ScanSteps:
        """The step size ``dt = softplus(dt + dt_bias)``, ``[batch, seq, channels]``: how strongly each token writes; derived, read-only.

        Positive: ``BETA_RANGE`` is ``(0, inf)``. As the kernel computes it
        from its ``dt`` and bias arguments, in float32.
        """
        args, kwargs = self.kernel_inputs()
        dt = args[self._position("dt")]
        bias = kwargs.get(self._position("dt_bias"))
        if bias is not None:
            dt = dt + (bias.to(dt.dtype) if self.decoding() else bias.to(dt.dtype)[..., None])
        if kwargs.get("dt_softplus" if self.decoding() else "delta_softplus", False):
            dt = F.softplus(dt)
        return _tokens_first(self, dt.float())

    betas = DerivedEProperty(
        _betas,
        description="The step size dt = softplus(dt + dt_bias), per token and channel; derived, read-only",
        unavailable=needs_torch_kernels,
    )

    def _decays(self) -> ScanDecays:
        """The log decay ``dt * A``, ``[batch, seq, channels, state_dim]``: the log of how much of the state each token keeps; derived, read-only.

        Non-positive. The state is multiplied by ``exp(decays)`` before the token writes into it.
        """
        args, _ = self.kernel_inputs()
        rates = args[self._position("A")].float()
        return self.betas[..., None] * rates

    decays = DerivedEProperty(
        _decays,
        description="The per-token log decay dt * A of the state; derived, read-only",
        unavailable=needs_torch_kernels,
    )

    @EProperty(
        RecurrentMixer.kernel_at("inputs"),
        "The cached state a decode step starts from",
        select=lambda e: 0 if e.decoding() else None,
        none_when_fresh=FRESH,
    )
    def state_input(self, value: Any) -> ScanState | None:
        """A decode step's cached state, ``[batch, channels, state_dim]``; None on a prompt, whose scan starts from zeros.

        A copy: the decode kernel updates the buffer it is handed (a copy of the
        cache's, which the cache then keeps) in place, so the live tensor would
        read as this step's output by the end of the trace. Assign to replace
        what the step starts from (copied into that buffer, which the kernel
        then updates).
        """
        if not self.decoding():
            return None
        return value.clone()

    @state_input.postprocess
    def state_input(self, value: Tensor) -> Tensor:
        if not self.decoding():
            raise ValueError(
                "a prompt's scan starts from zeros and takes no state (transformers' Mamba-1 scan has no initial "
                "state); assign state_input on a decode step, or set_state_after(t, ...) inside the prompt"
            )
        args, _ = self.kernel_inputs()
        args[0].copy_(value)
        return args[0]

    # -- what it returns ---------------------------------------------------------------

    def _state_output_key(self) -> str:
        if self.decoding():
            return self._inside(self.STEP_CACHE_OP)
        return f"source.{self.CHUNK_KERNEL}.output"

    @EProperty(
        _state_output_key,
        "The state after this call's last token",
        select=lambda e: 1 if not e.decoding() and e.caches() else None,
    )
    def state_output(self, value: Any) -> ScanState | None:
        """The state after this call's last token, ``[batch, channels, state_dim]``: what the cache receives.

        The scan's returned state on a prompt; on a decode step the updated
        state as the kernel copies it into the cache. None when the call keeps
        no cache (``use_cache=False``). Assigning it changes what the next
        decode step starts from, not this call's output.
        """
        if not self.decoding() and not self.caches():
            return None
        return value

    @state_output.postprocess
    def state_output(self, value: Tensor) -> Tensor:
        if not self.decoding() and not self.caches():
            raise ValueError("this call keeps no cache (use_cache=False): there is no state it hands on to write")
        return value

    def _head_outputs_key(self) -> str:
        return self._inside(self.OUTPUT_OPS[self.decoding()])

    @EProperty(_head_outputs_key, "y before the gate and out_proj", unavailable=needs_torch_kernels)
    def attention_head_outputs(self, value: Tensor) -> ScanValues:
        """The scan's output ``y = C . h + D * x``, ``[batch, seq, channels]``: before the ``silu(z)`` gate and ``out_proj``.

        A binding inside the kernel, laid out tokens first: in-place edits and
        assignment reach what the gate and ``out_proj`` receive.
        """
        return _tokens_first(self, value)

    @attention_head_outputs.postprocess
    def attention_head_outputs(self, value: Tensor) -> Tensor:
        return _kernel_layout(self, value)

    # -- the state after each token ----------------------------------------------------

    def _state_at(self, kernel: str) -> str:
        op = self.STEP_STATE_OP if kernel == self.RECURRENT_KERNEL else self.STATE_OP
        return f"source.{kernel}.source.{self.KERNEL_BODY}.source.{op}.output"

    @EProperty(
        TokenPinnedMixer._state_key,
        "The state after a token of this call, one occurrence per token",
        unavailable=needs_token_loop,
    )
    def state(self, value: Tensor) -> ScanState:
        """The state after a token, ``[batch, channels, state_dim]``: one occurrence per token of the scan's loop.

        A location inside the prompt's token loop (``STATE_OP``), walked with
        nnsight's own iteration: ``for t in tracer.iter[:]: mix.state`` reads
        the state after every token, and an assignment there is what the
        following tokens continue from (and what token t's own output reads).
        Read unpinned on a decode step, it is the single update's new state
        (``STEP_STATE_OP``).
        """
        return value

    def _scan_states(self) -> ScanStates:
        """The state after every token of this call, ``[batch, seq, channels, state_dim]``; one token on a decode step."""
        return self._token_states()

    states = DerivedEProperty(
        _scan_states,
        description="The state after every token of this call; needs route_kernels(family, 'torch')",
        unavailable=needs_token_loop,
    )


def _operation(envoy: SelectiveScan, path: str) -> Any:
    """The operation a dotted path names from the forward (``outer_0.source.inner_0``), drilling through each ``source``."""
    node = envoy.source
    for segment in path.split("."):
        node = node.source if segment == "source" else getattr(node, segment)
    return node


def _tokens_first(envoy: SelectiveScan, value: Tensor, vector: bool = False) -> Tensor:
    """A kernel argument laid out tokens first, as a view: ``[b, c, s]`` to ``[b, s, c]``, ``[b, c]`` to ``[b, 1, c]``.

    ``vector``: B or C, which gain the group axis, ``[b, s, 1, n]``.
    """
    laid = value.unsqueeze(1) if envoy.decoding() else value.transpose(1, 2)
    return laid.unsqueeze(2) if vector else laid


def _kernel_layout(envoy: SelectiveScan, value: Tensor, vector: bool = False) -> Tensor:
    """A value laid back out as the kernel's argument: the inverse of ``_tokens_first``."""
    if vector:
        value = value.squeeze(2)
    return value[:, 0] if envoy.decoding() else value.transpose(1, 2)


def _through_view(vector: bool = False) -> Any:
    """The write-back of a value served as a view of a kernel argument: the view laid back out, handed to the kernel.

    The same storage and numbers as the argument (an in-place edit of the view
    lands either way), but the kernel now computes from the served view, so a
    backward reaches it: ``value.grad`` is the metric's derivative, not None.
    """

    def transform(envoy: SelectiveScan, view: Tensor, served: Tensor) -> Tensor:
        # laid out by the argument's own shape, not by decoding(): the write-back may run once the worker is on the next call
        value = view.squeeze(2) if vector else view
        return value[:, 0] if served.dim() < value.dim() else value.transpose(1, 2)

    return transform


for _value, _vector in (
    (SelectiveScan.attention_queries, True),
    (SelectiveScan.attention_keys, True),
    (SelectiveScan.attention_values, False),
    (SelectiveScan.attention_head_outputs, False),
):
    # nnsight ships no types: mypy reads a value its untyped ``postprocess`` redefined as an overloaded function
    _value.transform(_through_view(_vector))  # type: ignore[attr-defined]
