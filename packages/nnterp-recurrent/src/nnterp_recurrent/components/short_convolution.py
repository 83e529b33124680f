"""A gated short convolution (LFM2's ``ShortConv``): a depthwise causal conv over a window of a few tokens, gated on both sides."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, overload

from nnterp import DerivedEProperty, EProperty, Unavailable, unavailable

import torch
from greenlet import getcurrent
from torch import Tensor

from ..layouts import ConvChannels, Window, Windows
from ..reasons import FRESH, HANDED_ON
from .mixer import RecurrentMixer

NO_GATES = (
    "a short convolution neither decays its window nor scales what it writes: each token shifts the window by one, "
    "its oldest column dropped whole, so there are no decays or betas"
)
NO_TOKEN_STATE = (
    "the convolution runs over the whole call at once, with no per-token state to walk or write (setting the window "
    "after token t would need each later token's conv recomputed); read states or state_after(t), which follow "
    "from conv_input, and write the window a call starts from (state_input) or leaves (state_output) instead"
)


@overload
def _tokens_first(value: Tensor) -> Tensor: ...
@overload
def _tokens_first(value: None) -> None: ...
def _tokens_first(value: Tensor | None) -> Tensor | None:
    # the module holds [batch, channels, seq] (and its window [batch, channels, window]): served tokens first; its own inverse
    return None if value is None else value.transpose(-1, -2)


class ShortConvolution(RecurrentMixer):
    """LFM2's gated short convolution (LFM2, LFM2-MoE, LFM3): a mixer whose state is the window of its last few inputs.

    For each token, with ``B, C, x = in_proj(h)`` split three ways::

        window = [window[1:], B * x]            # the last kernel_size conv inputs
        y      = C * (conv_weights . window + conv_bias)
        out    = out_proj(y)

    so the shared names mean what they mean on a Mamba scan: ``attention_keys``
    is ``B`` (how strongly each channel of a token enters the window),
    ``attention_queries`` is ``C`` (what reads the conv's result),
    ``attention_values`` is ``x``; the state is the window, ``[batch,
    kernel_size, channels]`` oldest first, as the cache holds it (the next
    token's conv reads its last ``kernel_size - 1`` columns). There are no
    decays or betas, and no state per token to walk: ``states`` follow from
    ``conv_input`` and ``state_input``.

    Everything is read at the binding that holds it, so writes reach the
    model: in the module's own forward, but for the window a call starts
    from, which the conv function it calls reads off the cache
    (``causal_conv1d_forward``, ``CONV_CALL``); the window a call leaves is
    read off the cache's buffer once the conv has updated it, and written
    into it. Inside that function the conv is ``causal_conv1d_fn`` on a
    prompt and ``causal_conv1d_update`` on a decode step (``kernel()``).
    """

    #: the conv on a prompt and on a decode step: calls inside ``CONV_CALL``, not of the forward; no value is read at
    #: them (``kernel()`` says which fires; ``route_kernels`` binds the dispatchers they name)
    CHUNK_KERNEL: ClassVar[str] = "causal_conv1d_fn_0"
    RECURRENT_KERNEL: ClassVar[str] = "causal_conv1d_update_0"
    RULE: ClassVar[str | None] = "short_conv"
    #: the forward's operations, by what they hold: B, C, x as in_proj splits them ([batch, channels, seq] each)
    SPLIT: ClassVar[str] = "BCx_chunk_0"
    #: B * x bound as the conv's input
    CONV_INPUT: ClassVar[str] = "hidden_states_1"
    #: the call of the function that reads the window off the cache, convolves, and leaves the new window there
    CONV_CALL: ClassVar[str] = "causal_conv1d_forward_0"
    #: inside ``CONV_CALL``: the window the cache holds, or None where the call has no cache (one binding)
    WINDOW: ClassVar[str] = "conv_state_0"
    #: the conv's output as the C gate multiplies it, bound from ``CONV_CALL`` on every path (the cached window's
    #: earlier columns already sliced off)
    CONV_OUTPUT: ClassVar[str] = "hidden_states_2"
    #: C times the conv's output, bound once the cache holds the new window
    GATED: ClassVar[str] = "y_0"
    #: the module holding the depthwise Conv1d
    CONV: ClassVar[str] = "conv"
    #: which of the cache's conv states for this layer is this mixer's
    STATE_INDEX: ClassVar[int] = 0

    # -- sizes -----------------------------------------------------------------------

    @property
    def channels(self) -> int:
        """Channels the conv mixes, each along its own window: the width of B, C, x and the window."""
        return self._conv().in_channels

    @property
    def kernel_size(self) -> int:
        """Tokens in the window: the conv's kernel size, ``conv_L_cache``."""
        return self._conv().kernel_size[0]

    @property
    def conv_weights(self) -> Tensor:
        """The depthwise conv's weights, ``[channels, kernel_size]``: column j multiplies the window's column j (oldest first)."""
        return self._conv().weight.squeeze(1)

    @property
    def conv_bias(self) -> Tensor | None:
        """The conv's bias, ``[channels]``, or None (``conv_bias=False``, every released LFM2)."""
        return self._conv().bias

    def _conv(self) -> Any:
        return getattr(self._module, self.CONV)

    # -- which call fires ------------------------------------------------------------

    def _cache(self) -> Any:
        """This call's cache, or None; outside a run (a value's path in ``support``) None."""
        if getattr(getcurrent(), "mediator", None) is None:
            return None
        return self.arguments()[1].get("cache")

    def continues(self) -> bool:
        """The conv function's own test (``CONV_CALL``): one token over a cached window takes ``causal_conv1d_update``."""
        cache = self._cache()
        if cache is None or self._length() != 1:
            return False
        layer = self._module.layer_idx
        return cache.get_conv_state(layer, state_idx=self.STATE_INDEX) is not None and not cache.is_recording_past(
            layer
        )

    def decoding(self) -> bool:
        """Whether this call is a decode step (``RECURRENT_KERNEL``)."""
        return self.kernel() == self.RECURRENT_KERNEL

    def _at(self, path: str) -> str:
        # every value's key records the call's arguments first: a later value of the call needs its cache
        if getattr(getcurrent(), "mediator", None) is not None:
            self.kernel()
        return path

    def _op(self, op: str) -> str:
        return self._at(f"source.{op}.output")

    def _window_key(self) -> str:
        return self._op(f"{self.CONV_CALL}.source.{self.WINDOW}")

    def _live_window(self) -> Tensor | None:
        """The cache's own window buffer for this mixer, ``[batch, channels, kernel_size]``, or None."""
        cache = self._cache()
        if cache is None:
            return None
        return cache.get_conv_state(self._module.layer_idx, state_idx=self.STATE_INDEX)

    # -- what in_proj makes ----------------------------------------------------------

    @EProperty(lambda envoy: envoy._op(envoy.SPLIT), "C: what reads the conv's output", select=1)
    def attention_queries(self, value: Tensor) -> ConvChannels:
        """``C``, the gate that reads each token's conv output, ``[batch, seq, channels]``: ``y = C * conv(window)``.

        A view of in_proj's output: in-place edits land; an assignment is laid back out.
        """
        return _tokens_first(value)

    @EProperty(lambda envoy: envoy._op(envoy.SPLIT), "B: how strongly each token enters the window", select=0)
    def attention_keys(self, value: Tensor) -> ConvChannels:
        """``B``, the gate on what each token writes into the window, ``[batch, seq, channels]``: ``conv_input = B * x``."""
        return _tokens_first(value)

    @EProperty(lambda envoy: envoy._op(envoy.SPLIT), "x: what each token writes into the window", select=2)
    def attention_values(self, value: Tensor) -> ConvChannels:
        """``x``, what each token writes into the window, ``[batch, seq, channels]``: ``conv_input = B * x``."""
        return _tokens_first(value)

    @EProperty(lambda envoy: envoy._op(envoy.CONV_INPUT), "B * x: what each token puts in the window")
    def conv_input(self, value: Tensor) -> ConvChannels:
        """``B * x``, what each token puts in the window, ``[batch, seq, channels]``: the conv's input.

        ``conv_input == attention_keys * attention_values``; ``state_output`` is
        its last ``kernel_size`` tokens (after ``state_input``'s, zeros on a
        fresh prompt). A view: in-place edits land; an assignment is laid back out.
        """
        return _tokens_first(value)

    decays = unavailable(NO_GATES)
    betas = unavailable(NO_GATES)

    # -- the window --------------------------------------------------------------------

    @EProperty(lambda envoy: envoy._window_key(), "The window this call starts from", none_when_fresh=FRESH)
    def state_input(self, value: Tensor | None) -> Window | None:
        """The window this call starts from, ``[batch, kernel_size, channels]``: None on a fresh prompt.

        A copy of the cache's buffer, which the call overwrites in place with
        the window it leaves. Assign to replace what the call starts from (it
        is copied into that buffer).
        """
        return None if value is None else _tokens_first(value).clone()

    @EProperty(lambda envoy: envoy._op(envoy.GATED), "The window after this call's last token", off_the_graph=HANDED_ON)
    def state_output(self, value: Tensor) -> Window | None:
        """The window after this call's last token, ``[batch, kernel_size, channels]``: what the cache holds for the next call.

        Read off the cache's buffer once the conv has updated it (a copy);
        None when the call keeps no cache (``use_cache=False``). Assigning it
        changes what the next call starts from, not this call's output.
        """
        live = self._live_window()
        return None if live is None else _tokens_first(live).clone()

    @EProperty(lambda envoy: envoy._op(envoy.CONV_OUTPUT), "The conv's output, before the C gate")
    def conv_output(self, value: Tensor) -> ConvChannels:
        """The depthwise conv of each token's window, ``[batch, seq, channels]``: ``conv_weights . states[:, t] + conv_bias``.

        Before the C gate: ``attention_head_outputs == attention_queries * conv_output``.
        In-place edits land; an assignment is laid back out.
        """
        return _tokens_first(value)

    @EProperty(lambda envoy: envoy._at("out_proj.input"), "Each channel's output, before out_proj")
    def attention_head_outputs(self, value: Tensor) -> ConvChannels:
        """``y = C * conv_output``, each channel's output, ``[batch, seq, channels]``: what ``out_proj`` receives."""
        return value

    # -- the window after each token -----------------------------------------------------

    state = unavailable(NO_TOKEN_STATE)

    def _states(self) -> Windows:
        """The window after every token of this call, ``[batch, seq, kernel_size, channels]``.

        ``states[:, t]`` is the last ``kernel_size`` conv inputs up to token t,
        after ``state_input``'s (zeros on a fresh prompt); ``states[:, -1]`` is
        ``state_output``. Derived from ``conv_input`` and ``state_input``: read-only.
        """
        written = self.conv_input
        before = self.state_input
        size = self.kernel_size
        if before is None:
            before = written.new_zeros(written.shape[0], size, written.shape[2])
        full = torch.cat([before.to(written.dtype), written], dim=1)
        # [batch, seq, channels, kernel_size] windows ending at each new token
        return full[:, 1:].unfold(1, size, 1).transpose(-1, -2)

    states = DerivedEProperty(
        _states, description="The window after every token of this call, from conv_input and state_input"
    )

    def state_after(self, t: int) -> Tensor:
        """The window after token ``t`` of this call, ``[batch, kernel_size, channels]``: ``states[:, t]``."""
        return self.states[:, t]

    def set_state_after(self, t: int, value: Tensor) -> None:
        """Unavailable: the conv has no per-token state to write (write ``state_input`` or ``state_output``)."""
        raise Unavailable(self, "set_state_after", NO_TOKEN_STATE)

    @contextmanager
    def keeping_states(self) -> Iterator[None]:
        """The window after every token is always there (derived from ``conv_input``): nothing to route.

        The values are read around the conv kernels, never inside, so they hold whichever implementation runs
        (``route_kernels`` still binds transformers' pure-torch ones).
        """
        yield


# -- write-backs: an assignment in the served layout, laid back out as the module holds it --------------------------


for _value in (
    ShortConvolution.attention_queries,
    ShortConvolution.attention_keys,
    ShortConvolution.attention_values,
    ShortConvolution.conv_input,
    ShortConvolution.conv_output,
):
    _value.postprocess(lambda envoy, value: _tokens_first(value))
    # the view laid back out is what the module goes on with: the same storage (an in-place edit lands either way),
    # and the module now computes from the served view, so a backward reaches it (value.grad is not None)
    _value.transform(lambda envoy, view, served: _tokens_first(view))


def _into_live_window(envoy: ShortConvolution, value: Tensor, missing: str) -> Tensor:
    """Copy an assigned window (served tokens first) into the cache's own buffer and return the buffer; raise ``missing`` where the call has none.

    The conv reads that buffer and the decode update writes into it, so an assignment keeps it that one tensor.
    """
    live = envoy._live_window()
    if live is None:
        raise ValueError(missing)
    live.copy_(_tokens_first(value).to(live.dtype))
    return live


@ShortConvolution.state_input.postprocess
def _state_input_back(envoy: ShortConvolution, value: Tensor) -> Tensor:
    return _into_live_window(
        envoy, value, "this call starts from no window (a fresh prompt, or no cache): there is no state_input to write"
    )


@ShortConvolution.state_output.postprocess
def _state_output_back(envoy: ShortConvolution, value: Tensor) -> Tensor:
    _into_live_window(envoy, value, "this call keeps no cache (use_cache=False): there is no state_output to write")
    return _GATED.__get__(envoy)


def _detached(key: Any, name: str) -> EProperty:
    # a location a value needs to read whole, not itself a standard value
    found = EProperty(key)
    found.name = name
    return found


_GATED = _detached(lambda envoy: envoy._op(envoy.GATED), "gated output")
