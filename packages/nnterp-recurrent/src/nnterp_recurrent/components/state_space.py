"""A Mamba-2 (SSD) mixer: linear attention with one scalar decay per head, read at the scan call its forward makes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, overload

from nnterp import DerivedEProperty, EProperty, Unavailable, unavailable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..layouts import Gates, SSDHeadOutputs, SSDKeys, SSDQueries, SSDValues, State, States
from ..reasons import FRESH, HANDED_ON, needs_torch_kernels
from .mixer import RecurrentMixer

#: the chunk size a mixer was built with, kept on the module while chunk_per_token has it at 1
BUILT = "_nnterp_chunk_size"


def needs_per_token_chunks(envoy: Any) -> str | None:
    """Why ``StateSpace.states`` is unavailable: no source to read, or the chunks are longer than a token."""
    reason = needs_torch_kernels(envoy)
    if reason is not None:
        return reason
    size = envoy._module.chunk_size
    if size == 1:
        return None
    return (
        f"the chunk scan keeps the state only at chunk boundaries, every {size} tokens; call "
        "nnterp_recurrent.chunk_per_token(model) before tracing so every token is a boundary (slower on long prompts)"
    )


NO_TOKEN_STATE = (
    "the chunk scan has no per-token state to walk or write: it computes every token's state in one cumulative step "
    "from the state the call starts from; read states or state_after(t) under nnterp_recurrent.chunk_per_token(model), "
    "and write the state a call starts from (state_input) or leaves (state_output) instead"
)


@overload
def _view(value: Tensor) -> Tensor: ...
@overload
def _view(value: None) -> None: ...
def _view(value: Tensor | None) -> Tensor | None:
    # [batch, heads, head_dim, state_dim] <-> [batch, heads, state_dim, head_dim]: its own inverse
    return None if value is None else value.transpose(-1, -2)


def _at(name: str) -> Any:
    # select: where the kernel that fires takes argument ``name``
    return lambda envoy: envoy.argument(name)


class StateSpace(RecurrentMixer):
    """A Mamba-2 (SSD) mixer (Mamba-2, Bamba, Nemotron-H, Falcon-H1, Zamba2, GraniteMoeHybrid): a selective state space.

    SSD is linear attention with one scalar decay per head. Each head keeps a
    ``head_dim`` by ``state_dim`` state ``h``, and each token does::

        h = exp(dt * A) * h + dt * x B^T
        y = h C + D * x

    so the shared names mean what they mean on a gated DeltaNet:
    ``attention_queries`` is ``C`` (what reads the state) and
    ``attention_keys`` is ``B`` (where a token writes), one per group of heads;
    ``attention_values`` is ``x``; ``betas`` is the step ``dt`` (how strongly
    a token writes) and ``decays`` is ``A * dt`` (the log of how much of the
    state it keeps). The state is served key side first,
    ``[batch, heads, state_dim, head_dim]``, the transpose of the cache's.

    Everything but ``attention_output`` is read at the scan call the forward's
    ``mamba2_scan_forward`` makes: ``mamba2_chunk_scan`` on a prompt, ``mamba2_selective_state_update``
    on a decode step, which has no sequence axis (served with one of 1) and
    takes its arguments in other places. The chunk scan holds the state only
    at chunk boundaries (``new_states``); under ``chunk_per_token(model)`` every
    token is one, so ``states`` and ``state_after(t)`` read the state after
    every token. There is no per-token state to walk or write (``state`` and
    ``set_state_after`` are unavailable).
    """

    # one level down since transformers 5.25: the forward calls mamba2_scan_forward, which calls the kernels
    CHUNK_KERNEL: ClassVar[str] = "mamba2_scan_forward_0.source.mamba2_chunk_scan_0"
    RECURRENT_KERNEL: ClassVar[str] = "mamba2_scan_forward_0.source.mamba2_selective_state_update_0"
    STATE_OP: ClassVar[str | None] = None
    #: inside the chunk scan's body: the state at every chunk boundary, [batch, chunks + 1, heads, head_dim, state_dim]
    CHUNK_STATES: ClassVar[str] = "new_states_0"
    #: inside the decode update's body: the new state as it is copied into the cache's buffer
    UPDATED_STATE: ClassVar[str] = "ssm_states_to_0"
    #: where the chunk scan takes each argument: a position, or a keyword
    CHUNK_ARGUMENTS: ClassVar[dict[str, int | str]] = {
        "hidden_states": 0,
        "dt": 1,
        "A": 2,
        "B": 3,
        "C": 4,
        "dt_bias": "dt_bias",
        "state": "initial_states",
    }
    #: where the decode update takes each argument: a position, or a keyword
    RECURRENT_ARGUMENTS: ClassVar[dict[str, int | str]] = {
        "state": 0,
        "hidden_states": 1,
        "dt": 2,
        "A": 3,
        "B": 4,
        "C": 5,
        "dt_bias": "dt_bias",
    }
    #: dt is a softplus, unbounded above
    BETA_RANGE: ClassVar[tuple[float, float]] = (0.0, float("inf"))
    #: the config field the mixer's chunk size is built from: ``chunk_size`` here; Bamba and Granite-MoE-Hybrid set
    #: ``mamba_chunk_size``
    CHUNK_SIZE_FIELD: ClassVar[str] = "chunk_size"
    RULE: ClassVar[str | None] = "ssd"

    @property
    def skip_weights(self) -> Tensor:
        """``D``, ``[heads]``: ``y = h C + D * x``, each head's skip."""
        return self._module.D

    # -- sizes -----------------------------------------------------------------------

    @property
    def num_heads(self) -> int:
        """Heads: one state each."""
        return self._module.num_heads

    @property
    def num_groups(self) -> int:
        """Groups of heads sharing one ``C`` and one ``B`` (``n_groups``)."""
        return self._module.n_groups

    @property
    def state_dim(self) -> int:
        """Width of ``C`` and ``B``: the key side of each head's state."""
        return self._module.ssm_state_size

    @property
    def head_dim(self) -> int:
        """Width of one head's values and outputs: the mixer's ``head_dim``, which on a hybrid is not its attention's."""
        return self._module.head_dim

    @property
    def key_dim(self) -> int:
        """The state's key side, ``state_dim``: the shared ``State`` layout's name for it."""
        return self.state_dim

    @property
    def value_dim(self) -> int:
        """The state's value side, ``head_dim``."""
        return self.head_dim

    # -- which argument, in which kernel ---------------------------------------------

    def decoding(self) -> bool:
        """Whether this call is a decode step (``RECURRENT_KERNEL``, no sequence axis)."""
        return self.kernel() == self.RECURRENT_KERNEL

    def argument(self, name: str) -> int | str:
        """Where the kernel that fires on this call takes ``name``: a position or a keyword."""
        return (self.RECURRENT_ARGUMENTS if self.decoding() else self.CHUNK_ARGUMENTS)[name]

    def _take(self, inputs: tuple[tuple, dict], name: str) -> Any:
        args, kwargs = inputs
        where = self.argument(name)
        if isinstance(where, int):
            return args[where]
        return kwargs.get(where)

    def _put(self, inputs: tuple[tuple, dict], name: str, value: Any) -> tuple[tuple, dict]:
        args, kwargs = inputs
        where = self.argument(name)
        if isinstance(where, int):
            return (*args[:where], value, *args[where + 1 :]), kwargs
        return args, {**kwargs, where: value}

    def _inputs(self) -> tuple[tuple, dict]:
        """The firing kernel's ``(args, kwargs)``, read at its call."""
        return _INPUTS.__get__(self)

    # -- what the scan reads ---------------------------------------------------------

    @EProperty(RecurrentMixer.kernel_at("inputs"), "C: what reads each head's state", select=_at("C"))
    def attention_queries(self, value: Tensor) -> SSDQueries:
        """``C``, what reads the state, ``[batch, seq, groups, state_dim]``: one per group of heads, after the conv.

        The heads of a group share it. Assign or edit in place: the scan reads what is written.
        """
        return _seq(self, value)

    @EProperty(RecurrentMixer.kernel_at("inputs"), "B: where each token writes into the state", select=_at("B"))
    def attention_keys(self, value: Tensor) -> SSDKeys:
        """``B``, where a token writes into the state, ``[batch, seq, groups, state_dim]``: one per group of heads."""
        return _seq(self, value)

    @EProperty(
        RecurrentMixer.kernel_at("inputs"), "x: what each token writes into the state", select=_at("hidden_states")
    )
    def attention_values(self, value: Tensor) -> SSDValues:
        """``x``, what each token writes, ``[batch, seq, heads, head_dim]``: the scan's ``hidden_states``."""
        return _seq(self, value)

    @EProperty(RecurrentMixer.kernel_at("inputs"), "The log of how much of the state each token keeps")
    def decays(self, value: tuple[tuple, dict]) -> Gates:
        """``A * dt``, ``[batch, seq, heads]``: the log of how much of the state each token keeps; float32, non-positive.

        The state is multiplied by ``exp(decays)`` before the token writes.
        Derived from the kernel's ``dt`` through ``dt_bias``, the softplus and
        ``A``; an assignment or in-place edit is carried back into ``dt``, so
        the scan computes the assigned decay (and the matching ``betas``).
        """
        return _read_on(self, _unedited(self._rates(value) * self._betas_of(value).float()), "decays")

    @EProperty(RecurrentMixer.kernel_at("inputs"), "dt: how strongly each token writes into the state")
    def betas(self, value: tuple[tuple, dict]) -> Gates:
        """``dt = softplus(dt + dt_bias)``, ``[batch, seq, heads]``: the step, how strongly each token writes; positive.

        Derived from the kernel's ``dt`` argument as the kernel derives it (and
        clamped to the mixer's ``dt_limit`` on a prompt). An assignment or
        in-place edit is carried back into ``dt``.
        """
        return _read_on(self, _unedited(self._betas_of(value)), "betas")

    @EProperty(RecurrentMixer.kernel_at("inputs"), "The state this call starts from", none_when_fresh=FRESH)
    def state_input(self, value: tuple[tuple, dict]) -> State | None:
        """The state this call starts from, ``[batch, heads, state_dim, head_dim]``: None on a fresh prompt.

        A copy: a decode step hands the kernel a buffer (a copy of the cache's,
        which the cache then keeps) that it overwrites with the step's new
        state. Assign to replace what the call starts from (on a decode step it
        is copied into that buffer).
        """
        state = self._take(value, "state")
        return None if state is None else _view(state).clone()

    # -- what it leaves --------------------------------------------------------------

    def _state_output_key(self) -> str:
        if self.decoding():
            return f"source.{self.RECURRENT_KERNEL}.source.{self.KERNEL_BODY}.source.{self.UPDATED_STATE}.output"
        return f"source.{self.CHUNK_KERNEL}.output"

    @EProperty(
        _state_output_key,
        "The state after this call's last token",
        unavailable=needs_torch_kernels,
        off_the_graph=HANDED_ON,
    )
    def state_output(self, value: Any) -> State | None:
        """The state after this call's last token, ``[batch, heads, state_dim, head_dim]``: what the cache receives.

        On a prompt the scan's returned state (None when the call keeps no
        cache); on a decode step the updated state as the kernel copies it into
        the cache. Assigning it changes what the next call starts from, not this call's output.
        """
        if self.decoding():
            return _view(value)
        return _view(value[1]) if isinstance(value, tuple) else None

    @EProperty(RecurrentMixer.kernel_at("output"), "Each head's output, before the gated norm")
    def attention_head_outputs(self, value: Any) -> SSDHeadOutputs:
        """``y``, each head's output with the ``D * x`` skip, ``[batch, seq, heads, head_dim]``: before the gated norm and ``out_proj``."""
        return _seq(self, value[0] if isinstance(value, tuple) else value)

    # -- the state after each token ----------------------------------------------------

    state = unavailable(NO_TOKEN_STATE)

    def _states(self) -> States:
        """The state after every token of this call, ``[batch, seq, heads, state_dim, head_dim]``.

        Off the chunk scan's boundaries, every token one under
        ``chunk_per_token(model)``; on a decode step, its ``state_output``.
        """
        if self.decoding():
            return self.state_output.unsqueeze(1)
        return _view(_CHUNK_STATES.__get__(self)[:, 1:])

    states = DerivedEProperty(
        _states,
        description="The state after every token of this call; needs nnterp_recurrent.chunk_per_token(model)",
        unavailable=needs_per_token_chunks,
    )

    def state_after(self, t: int) -> Tensor:
        """The state after token ``t`` of this call, ``[batch, heads, state_dim, head_dim]``: ``states[:, t]``."""
        return self.states[:, t]

    def set_state_after(self, t: int, value: Tensor) -> None:
        """Unavailable: the chunk scan has no per-token state to write (write ``state_input`` or ``state_output``)."""
        raise Unavailable(self, "set_state_after", NO_TOKEN_STATE)

    @contextmanager
    def keeping_states(self) -> Iterator[None]:
        """Within it, this model's Mamba-2 mixers run one-token chunks, so the scan keeps every token's state.

        What ``chunk_per_token`` does, undone on the way out to the chunk sizes
        the mixers had; the kernels are routed to the pure-torch ones as well.
        """
        if not getattr(self.root, "dispatched", True):
            self.root.dispatch()
        blocks = _mixers(self.root)
        sizes = [mixer._module.chunk_size for mixer in blocks]
        previous = self.routing()
        self.route("torch")
        chunk_per_token(self.root)
        try:
            yield
        finally:
            for mixer, size in zip(blocks, sizes):
                mixer._module.chunk_size = size
            self.route(previous)

    def built_chunk_size(self) -> int:
        """The chunk size the mixer was built with: its config's (``CHUNK_SIZE_FIELD``)."""
        built = self._module.__dict__.get(BUILT)
        if built is not None:
            return built
        config = self.root._module.config
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        return getattr(config, self.CHUNK_SIZE_FIELD, self._module.chunk_size)

    # -- dt, seen as betas and decays ------------------------------------------------

    def _rates(self, inputs: tuple[tuple, dict]) -> Tensor:
        """``A`` per head, float32: the decode update takes it expanded over ``[heads, head_dim, state_dim]``."""
        a = self._take(inputs, "A")
        return (a[:, 0, 0] if a.dim() == 3 else a).float()

    def _betas_of(self, inputs: tuple[tuple, dict]) -> Tensor:
        """The step the kernel computes from its ``dt`` argument, ``[batch, seq, heads]``."""
        _, kwargs = inputs
        dt, bias = self._take(inputs, "dt"), self._take(inputs, "dt_bias")
        if self.decoding():
            # [batch, heads, head_dim], the same number along head_dim; the bias likewise
            dt, bias = dt[..., 0], (None if bias is None else bias[..., 0])
        if bias is not None:
            dt = dt + bias.to(dt.dtype)
        if kwargs.get("dt_softplus", False):
            dt = F.softplus(dt)
        if not self.decoding():
            low, high = kwargs.get("dt_limit", (0.0, float("inf")))
            dt = torch.clamp(dt, min=low, max=high)
        return _seq(self, dt)

    def _dt_for(self, inputs: tuple[tuple, dict], betas: Tensor) -> tuple[tuple, dict]:
        """The kernel's arguments with ``dt`` replaced so that the kernel computes ``betas``."""
        _, kwargs = inputs
        served, bias = self._take(inputs, "dt"), self._take(inputs, "dt_bias")
        betas = betas.to(torch.float32)
        if self.decoding():
            betas = betas.squeeze(1)
            bias = None if bias is None else bias[..., 0]
        dt = betas + torch.log(-torch.expm1(-betas)) if kwargs.get("dt_softplus", False) else betas
        if bias is not None:
            dt = dt - bias.float()
        dt = dt.to(served.dtype)
        if self.decoding():
            dt = dt[..., None].expand_as(served)
        return self._put(inputs, "dt", dt)


# -- write-backs: how an assignment or an edit reaches the kernel --------------------------


def _seq(envoy: StateSpace, value: Tensor) -> Tensor:
    # a decode step's tensors have no sequence axis: serve one of 1
    return value.unsqueeze(1) if envoy.decoding() else value


def _unseq(envoy: StateSpace, value: Tensor) -> Tensor:
    return value.squeeze(1) if envoy.decoding() else value


def _unedited(value: Tensor) -> Tensor:
    value._nnterp_unedited = value.detach().clone()  # type: ignore[attr-defined]  # torch's stubs declare no attribute a tensor is given
    return value


def _read_on(envoy: StateSpace, value: Tensor, gate: str) -> Tensor:
    # which gate, and the kernel it was read at: its write-back may run once the worker is on the next call
    value._nnterp_kernel, value._nnterp_gate = envoy.kernel(), gate  # type: ignore[attr-defined]  # as in _unedited
    return value


def _edited(view: Tensor) -> bool:
    unedited = getattr(view, "_nnterp_unedited", None)
    return unedited is None or not torch.equal(view, unedited)


# A value served as a view of the model's tensor (an unsqueezed or transposed one) needs no write-back for
# in-place edits to land; an assignment is laid back out by its postprocess.
for _value in (StateSpace.attention_queries, StateSpace.attention_keys, StateSpace.attention_values):
    _value.postprocess(_unseq)


def _gate_back(to_betas: Any) -> Any:
    def transform(envoy: StateSpace, view: Tensor, served: tuple[tuple, dict]) -> tuple[tuple, dict]:
        if not _edited(view):
            return _differentiated(envoy, served, view)
        return envoy._dt_for(served, to_betas(envoy, served, view))

    def postprocess(envoy: StateSpace, value: Tensor) -> tuple[tuple, dict]:
        served = envoy._inputs()
        return envoy._dt_for(served, to_betas(envoy, served, value))

    return transform, postprocess


def _differentiated(envoy: StateSpace, served: tuple[tuple, dict], view: Tensor) -> tuple[tuple, dict]:
    """The kernel's own ``dt`` bit for bit, differentiated through the served gate (``betas``, or ``decays``): an
    unedited read put back.

    ``dt`` is derived from the kernel's argument, so without this the kernel
    computes beside the served tensor and no gradient reaches it; here the
    forward goes on with the argument's exact values (``through -
    through.detach()`` is zero) while autograd's record runs through the gate.
    A prompt's chunk kernel only: worked out with its argument positions, not
    ``decoding()``, since the write-back may run once the worker is on the next
    call; a decode step's gate is put back as it was.
    """
    kernel = getattr(view, "_nnterp_kernel", None)
    if not (torch.is_grad_enabled() and view.requires_grad) or kernel != envoy.CHUNK_KERNEL:
        return served
    args, kwargs = served

    def take(name: str) -> Any:
        where = envoy.CHUNK_ARGUMENTS[name]
        return args[where] if isinstance(where, int) else kwargs.get(where)

    dt, bias, rates = take("dt"), take("dt_bias"), take("A")
    betas = view.float()
    if getattr(view, "_nnterp_gate", None) == "decays":
        betas = betas / (rates[:, 0, 0] if rates.dim() == 3 else rates).float()
    through = betas + torch.log(-torch.expm1(-betas)) if kwargs.get("dt_softplus", False) else betas
    if bias is not None:
        through = through - bias.float()
    where = envoy.CHUNK_ARGUMENTS["dt"]
    dt = dt.detach() + (through - through.detach()).to(dt.dtype)
    if isinstance(where, int):
        return (*args[:where], dt, *args[where + 1 :]), kwargs
    return args, {**kwargs, where: dt}


def _betas_from_decays(envoy: StateSpace, inputs: tuple[tuple, dict], decays: Tensor) -> Tensor:
    return decays.float() / envoy._rates(inputs)


for _value, _to_betas in (
    (StateSpace.betas, lambda envoy, inputs, betas: betas),
    (StateSpace.decays, _betas_from_decays),
):
    _transform, _postprocess = _gate_back(_to_betas)
    _value.transform(_transform)
    _value.postprocess(_postprocess)


@StateSpace.state_input.postprocess
def _state_input_back(envoy: StateSpace, value: Tensor) -> tuple[tuple, dict]:
    served = envoy._inputs()
    live = envoy._take(served, "state")
    state = _view(value)
    if envoy.decoding() and live is not None:
        # the update writes the new state into the buffer it is handed, which the cache then keeps: keep it that one
        live.copy_(state.to(live.dtype))
        return served
    return envoy._put(served, "state", state if live is None else state.to(live.dtype))


@StateSpace.state_output.postprocess
def _state_output_set(envoy: StateSpace, value: Tensor) -> Any:
    if envoy.decoding():
        return _view(value)
    served = _OUTPUT.__get__(envoy)
    if not isinstance(served, tuple):
        raise ValueError("this call keeps no cache (use_cache=False): there is no state_output to write")
    return (served[0], _view(value).to(served[1].dtype), *served[2:])


@StateSpace.attention_head_outputs.postprocess
def _head_outputs_set(envoy: StateSpace, value: Tensor) -> Any:
    served = _OUTPUT.__get__(envoy)
    y = _unseq(envoy, value)
    return (y, *served[1:]) if isinstance(served, tuple) else y


# -- locations read without being values ---------------------------------------------------


def _detached(key: Any, name: str) -> EProperty:
    # a location the values above need to read whole, not itself a standard value (not in values() or support)
    found = EProperty(key)
    found.name = name
    return found


_INPUTS = _detached(RecurrentMixer.kernel_at("inputs"), "kernel inputs")
_OUTPUT = _detached(RecurrentMixer.kernel_at("output"), "kernel output")
_CHUNK_STATES = _detached(
    lambda envoy: f"source.{envoy.CHUNK_KERNEL}.source.{envoy.KERNEL_BODY}.source.{envoy.CHUNK_STATES}.output",
    "chunk states",
)


# -- chunk_per_token ---------------------------------------------------------------------


def _mixers(model: Any) -> list[StateSpace]:
    return [
        mixer
        for layer in range(model.num_layers)
        if isinstance(mixer := model.layers[layer].__dict__.get("linear_attn"), StateSpace)
    ]


def chunk_per_token(model: Any, enabled: bool = True) -> None:
    """Run every Mamba-2 mixer of ``model`` with a chunk size of 1, so the chunk scan keeps the state after every token.

    The scan materializes the state at each chunk boundary (``StateSpace.states``);
    with one-token chunks every token is one. The outputs are the same, the
    cost is not: the recurrence between chunks is quadratic in their number.
    It sets each mixer module's ``chunk_size`` (read on every call) of this one
    model, from the next trace on; a lazily built model is loaded first, since
    loading replaces its modules. ``enabled=False`` restores the chunk size
    each mixer was built with.
    """
    if not getattr(model, "dispatched", True):
        model.dispatch()
    for mixer in _mixers(model):
        module = mixer._module
        if enabled:
            module.__dict__.setdefault(BUILT, mixer.built_chunk_size())
            module.chunk_size = 1
        else:
            module.chunk_size = mixer.built_chunk_size()
            module.__dict__.pop(BUILT, None)
