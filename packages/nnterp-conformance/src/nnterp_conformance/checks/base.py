"""What a check is: a function of a model and prompts that passes, skips with a reason, or fails saying where and by how much."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nnterp.identities import Identity, compare
from nnterp.protocols import StandardModel
from nnterp.tolerances import computed_in

import torch


class CheckFailure(AssertionError):
    """An identity that does not hold: the message names the value, the block and the size of the error."""


class Skip(Exception):
    """A check that does not apply to this model, and why."""


@dataclass(frozen=True)
class Case:
    """What a check runs on: a batch of prompts, and which block, head and edit to exercise.

    ``prompts`` is a list of strings or of token-id lists (left-padded into one
    batch). ``block`` and ``head`` are fractions in [0, 1) that pick among the
    blocks (or heads) a check can use, so one case fits every model; ``edit``
    is how an edit check changes a value (``scale``, ``noise`` or ``zero``),
    with ``seed`` fixing the noise.
    """

    prompts: tuple
    block: float = 0.5
    head: float = 0.0
    edit: str = "scale"
    seed: int = 0

    @classmethod
    def of(cls, prompts: Any) -> Case:
        """A case from a case, a prompt, or a list of prompts."""
        if isinstance(prompts, Case):
            return prompts
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        return cls(tuple(prompts))

    @property
    def batch(self) -> list:
        """The prompts as the trace takes them."""
        return [list(prompt) if isinstance(prompt, (list, tuple)) else prompt for prompt in self.prompts]

    def pick(self, choices: list[int]) -> int:
        """The block (or head) this case exercises among ``choices``."""
        return choices[min(int(self.block * len(choices)), len(choices) - 1)]

    def alone(self, row: int) -> Case:
        """The same case on row ``row``'s prompt alone."""
        return Case((self.prompts[row],), self.block, self.head, self.edit, self.seed)

    def edited(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` changed by this case's edit (a new tensor)."""
        if self.edit == "scale":
            return value * 0.5
        if self.edit == "noise":
            generator = torch.Generator().manual_seed(self.seed)
            noise = torch.randn(value.shape, generator=generator, dtype=torch.float32).to(value.dtype)
            return value + noise * value.float().std().clamp(min=1e-3).to(value.dtype)
        if self.edit == "zero":
            changed = value.clone()
            changed[:, -1] = 0  # the last position of every row: a real token under left padding
            return changed
        raise ValueError(f"unknown edit {self.edit!r}; one of scale, noise, zero")


@dataclass
class Check:
    """A named check: ``run(model, case)`` returns a detail line, raises ``Skip`` or ``CheckFailure``."""

    name: str
    run: Callable[..., str]
    kind: str
    description: str
    applies: Callable[[Any], bool] | None = None
    #: whether the suite also runs it on drawn cases: False for a check whose identity is the same on any prompt
    #: and that costs a trace per value (assigning every value back), which the fixed prompts already exercise
    drawn: bool = True

    def applies_to(self, model: StandardModel) -> bool:
        """Whether the check is about something ``model`` has (every check but a component's own, such as a mixture's)."""
        return self.applies is None or self.applies(model)


@dataclass
class Verdict:
    """One check's result on one model."""

    name: str
    status: str  # "pass" | "fail" | "skip"
    detail: str = ""
    #: where a check that crashed raised (``raised_at``), innermost last; empty for any other verdict
    raised_at: list[str] = field(default_factory=list, repr=False, compare=False)

    def __str__(self) -> str:
        return f"{self.status.upper():4}  {self.name}: {self.detail}"


#: every check, by name, in the order they run; families' packages add theirs through `check`
CHECKS: dict[str, Check] = {}


def check(
    kind: str, applies: Callable[[Any], bool] | None = None, drawn: bool = True
) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register a check function under its name; its docstring's first line is its description.

    ``applies(model)`` limits it to the models that have what it is about: on
    the others it is not run, nor reported, rather than skipped. ``drawn=False``
    keeps the suite to the fixed prompts for it (``Check.drawn``).
    """

    def register(function: Callable[..., str]) -> Callable[..., str]:
        description = (function.__doc__ or function.__name__).strip().splitlines()[0]
        CHECKS[function.__name__] = Check(function.__name__, function, kind, description, applies, drawn)
        return function

    return register


def load_plugins() -> None:
    """Import the modules registered under the ``nnterp.checks`` entry points, so their checks join ``CHECKS``."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="nnterp.checks"):
        entry.load()


def verdict(name: str, model: StandardModel, case: Any) -> Verdict:
    """Run one check on a case (or plain prompts) and say how it went (an unexpected error is a failure, with its type)."""
    try:
        detail = CHECKS[name].run(model, Case.of(case))
    except Skip as skip:
        return Verdict(name, "skip", str(skip))
    except CheckFailure as failure:
        return Verdict(name, "fail", str(failure))
    except Exception as error:  # noqa: BLE001 - a check that crashes has failed
        return crashed(name, error)
    return Verdict(name, "pass", detail)


def crashed(name: str, error: BaseException) -> Verdict:
    """The failing verdict of a check that raised ``error`` rather than failing an identity: its type, its message, where."""
    return Verdict(name, "fail", f"{type(error).__name__}: {error}", raised_at(error))


def raised_at(error: BaseException) -> list[str]:
    """The frames ``error`` passed through, outermost first, as ``file:line in function``."""
    import traceback

    return [f"{frame.filename}:{frame.lineno} in {frame.name}" for frame in traceback.extract_tb(error.__traceback__)]


# -- helpers the checks share --------------------------------------------------------


#: the children a block's sequence mixer may be: softmax attention, or a recurrent mixer (a hybrid's other blocks, an SSM's)
MIXERS = ("self_attn", "linear_attn")


def sublayers(model: StandardModel, layer: int) -> tuple[str, ...]:
    """The contributions block ``layer`` adds, in the order it calls them: each mixer's ``attention_output``, its MLP's ``mlp_output``.

    A block lacks a sublayer when the module is not there at all (an SSM
    block has no MLP; a hybrid's block has one mixer or the other): it adds
    nothing, and the identity holds without it. A parallel hybrid's block
    (Falcon-H1) runs both mixers on one norm's output and adds both.
    """
    block = model.layers[layer]
    contributions = getattr(block, "contributions", None)
    if contributions is not None:
        return contributions()
    mixers = tuple(f"{mixer}.attention_output" for mixer in mixers_of(model, layer))
    return (*mixers, *(("mlp.mlp_output",) if hasattr(block, "mlp") else ()))


def mixers_of(model: StandardModel, layer: int) -> tuple[str, ...]:
    """The names of block ``layer``'s sequence mixers, in the order the block calls them (its ``SUBLAYERS``)."""
    block = model.layers[layer]
    order = [name for name in getattr(type(block), "SUBLAYERS", MIXERS) if name in MIXERS]
    return tuple(name for name in order if hasattr(block, name))


def has_softmax_attention(model: StandardModel) -> bool:
    """Whether any block mixes tokens through a softmax attention (``self_attn``): a pure SSM's blocks (Mamba's) do not."""
    return any("self_attn" in mixers_of(model, layer) for layer in range(model.num_layers))


def has_mlp(model: StandardModel) -> bool:
    """Whether any block has an MLP (``mlp``, dense or a mixture): a pure SSM's blocks (Mamba's) do not."""
    return any(hasattr(model.layers[layer], "mlp") for layer in range(model.num_layers))


def multi_stream(model: StandardModel) -> bool:
    """Whether the model's blocks carry several residual streams per token (hyper-connections): a block whose
    ``layer_output`` is laid out ``[batch, seq, num_streams, hidden_size]`` (``nnterp.layouts.Streams``)."""
    from nnterp.layouts import STREAMS

    for layer in range(model.num_layers):
        value = (
            type(model.layers[layer]).values().get("layer_output")
            if hasattr(type(model.layers[layer]), "values")
            else None
        )
        if value is not None and STREAMS in (value.dims or ()):
            return True
    return False


def single_stream(model: StandardModel) -> bool:
    """Whether the model's blocks carry one residual stream: what the sum identities (``contribution``, ``mid_stream``)
    are about; a multi-stream block's are ``streams.py``'s."""
    return not multi_stream(model)


def mixer_of(model: StandardModel, layer: int) -> str | None:
    """The name of block ``layer``'s first sequence mixer (``self_attn`` or ``linear_attn``), or None."""
    return next(iter(mixers_of(model, layer)), None)


def get(envoy: Any, dotted: str) -> Any:
    """The value or child at a dotted name below ``envoy`` (``"self_attn.attention_output"``), a number indexing a
    list of blocks (``"vision.layers.1.layer_output"``)."""
    for part in dotted.split("."):
        envoy = envoy[int(part)] if part.isdigit() else getattr(envoy, part)
    return envoy


def available(model: StandardModel, name: str) -> list[int]:
    """The blocks on which the block value ``name`` is available."""
    reasons = model.support().get(name, {index: "unknown value" for index in range(model.num_layers)})
    return [index for index in range(model.num_layers) if not reasons or index not in reasons]


def require(model: StandardModel, *names: str) -> list[int]:
    """The blocks on which every one of ``names`` is available; ``Skip`` when there are none."""
    blocks = set(range(model.num_layers))
    for name in names:
        blocks &= set(available(model, name))
    if not blocks:
        support = model.support()
        reasons = "; ".join(f"{name}: {support.get(name)}" for name in names if support.get(name))
        raise Skip(f"no block has {', '.join(names)} ({reasons})")
    return sorted(blocks)


def read(model: StandardModel, case: Case, plan: Sequence[tuple[int | None, str]]) -> list[torch.Tensor]:
    """Read each ``(layer, name)`` of ``plan`` in one trace, in forward order; ``None`` for a root value."""
    values: list[torch.Tensor] = []
    with torch.no_grad(), model.trace(case.batch):
        for layer, name in plan:
            host = model if layer is None else model.layers[layer]
            values.append(get(host, name).detach().clone())
    return values


def read_apart(
    model: StandardModel, case: Case, names: tuple[str, ...], blocks: list[int]
) -> dict[str, list[torch.Tensor]]:
    """Each block value of ``names`` on every block of ``blocks``, one trace per name.

    Slower than one trace, but it needs no forward order between the values,
    so a value pointed at the wrong place still reads and the identity, not
    the order, is what fails.
    """
    return {name: read(model, case, [(layer, name) for layer in blocks]) for name in names}


def expect_close(what: str, actual: torch.Tensor, expected: torch.Tensor, **kwargs: Any) -> float:
    """Fail with ``what``, the gap and the allowed gap unless the two agree; return the gap.

    ``dtype=`` judges by another dtype's tolerance than ``expected``'s (a sum
    taken in float32 over a half-precision tensor).
    """
    verdict = compare(actual, expected, **kwargs)
    if not verdict.ok:
        raise CheckFailure(f"{what}: {verdict.detail}")
    return verdict.gap


def expect_holds(
    identity: Identity, what: str, actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype | None = None
) -> float:
    """Fail with ``what`` and the gap unless ``identity`` holds between the value read and the side recomputed; return the gap.

    The identity is ``nnterp.identities``', which the proof at load judges by too.
    """
    verdict = identity.judge(actual, expected, dtype)
    if not verdict.ok:
        raise CheckFailure(f"{what}: {verdict.detail}")
    return verdict.gap


def model_dtype(model: StandardModel) -> torch.dtype:
    """The dtype of the model's weights: what it computes in, whatever dtype it upcasts a result to (the coarsest of
    its weights', where it keeps some in float32: ``nnterp.tolerances.computed_in``)."""
    return computed_in(model._module)


def prompt_lengths(model: StandardModel, case: Case) -> list[int]:
    """The number of tokens of each of the case's prompts, once tokenized."""
    return [
        len(prompt) if not isinstance(prompt, str) else len(model.tokenizer(prompt)["input_ids"])
        for prompt in case.prompts
    ]


def input_shape(model: StandardModel, case: Case) -> tuple[int, int]:
    """``(batch, seq)`` of the case's batch once tokenized and padded."""
    lengths = prompt_lengths(model, case)
    return len(lengths), max(lengths)


@dataclass
class Gaps:
    """The largest gap seen over several comparisons, for a check's detail line."""

    worst: float = 0.0
    count: int = 0

    def add(self, gap: float) -> None:
        self.worst = max(self.worst, gap)
        self.count += 1

    def __str__(self) -> str:
        return f"{self.count} comparisons, largest gap {self.worst:.3g}"
