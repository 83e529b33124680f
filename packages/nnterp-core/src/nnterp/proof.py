"""The proof at load: the kit's cheap identities on the loaded checkpoint, and the values each failure withdraws.

``StandardizedTransformer(..., verify=True)`` runs them after loading (and
does so unasked for an inferred family and on a transformers release the
families were not proven on): a few short traces on a fixed prompt, on the
real weights. Each identity vouches for values; where one fails, those values
become ``Unavailable`` on the blocks it failed on, with the identity and its
gap as the reason, and everything else is served::

    model = StandardizedTransformer(path, verify=True)
    print(model.proof)          # each identity: holds, fails (and what it withdrew), or not run and why
    model.proof.refuted         # {(layer, "self_attn.attention_output"): "the proof at load found ..."}

The identities are ``nnterp.identities``', which the conformance kit's checks
judge by too, restricted to the cheap ones: the contributions add up to the block's output, the
stream between the sublayers is the input plus the attention's, each block
hands its output to the next, the logits are the last stream projected, the
pattern is the softmax of the scores, the heads are the pattern against the
values, and the down projection of the neurons is the MLP's output where the
MLP returns that projection. A read that raises refutes what it was read for,
and the reason names the identity being checked, the value read and the
operation that raised (its line, and the module whose forward ran it).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import linecache
import os
import textwrap
import traceback
from typing import Any

import torch

from .components import Mlp
from .components.standard import Standard, blocks_support
from .descriptors import withdraw
from .identities import (
    CONTRIBUTION,
    HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES,
    LOGITS_FROM_LAST_LAYER,
    MID_STREAM,
    NEURONS_MAKE_CONTRIBUTION,
    PATTERN_IS_SOFTMAX_OF_SCORES,
    STREAM_CONTINUITY,
    Identity,
    IdentityMismatch,
    heads_from_pattern,
    softmax_pattern,
    stream_sum,
)
from .protocols import StandardModel
from .tolerances import coarsest, computed_in

#: the prompt's length, in tokens; the ids are drawn from this seed, so every proof reads the same prompt
PROMPT_TOKENS, SEED = 12, 0

HOLDS, FAILS, NOT_RUN = "holds", "fails", "not run"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One identity on the loaded checkpoint: whether it holds, the gap or why it did not run, the values it withdrew."""

    identity: str
    status: str
    detail: str
    refuted: tuple[tuple[int | None, str], ...] = ()
    #: whether it failed because a read raised (``detail`` says which and where) rather than by a gap
    raised: bool = False
    #: the values a holding identity vouches for (what it read and what its failure would withdraw), by dotted name
    proved: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """What a value this finding refutes says when read."""
        if self.raised:
            return f"the proof at load could not check {self.identity}: {self.detail}"
        return f"the proof at load found {self.identity} does not hold: {self.detail}"

    def __str__(self) -> str:
        withdrawn = f"; withdrawn: {', '.join(_spelled(at) for at in self.refuted)}" if self.refuted else ""
        return f"{self.identity}: {self.status} ({self.detail}){withdrawn}"


@dataclasses.dataclass(frozen=True)
class Proof:
    """Every identity's finding on one checkpoint, and the values the failures withdrew, each with its reason."""

    findings: tuple[Finding, ...]
    refuted: dict[tuple[int | None, str], str]
    #: the values a block serves that read on the prompt without raising, but that no identity which held vouches for:
    #: served, and not proven on this checkpoint (the conformance kit proves them: ``nnterp-conformance check``)
    unproven: tuple[str, ...] = ()

    @property
    def holds(self) -> bool:
        """Whether no identity failed."""
        return not self.refuted

    @property
    def proved(self) -> tuple[str, ...]:
        """The values an identity that held vouches for, by dotted name, in the order the identities ran."""
        return tuple(
            dict.fromkeys(name for finding in self.findings if finding.status == HOLDS for name in finding.proved)
        )

    def __str__(self) -> str:
        return "\n".join(str(finding) for finding in self.findings)


def prove(model: StandardModel, withdraw: bool = True) -> Proof:
    """Run the identities on ``model`` (a loaded ``StandardizedTransformer``) and, with ``withdraw``, make what each
    failure refutes ``Unavailable`` on it."""
    prompt = torch.randint(
        1, max(model.vocab_size, 2), (1, PROMPT_TOKENS), generator=torch.Generator().manual_seed(SEED)
    )
    reads = _Reads(model, prompt)
    findings, titles = [], {}
    for identity in IDENTITIES:
        reads.checking = identity.__name__
        findings.append(identity(model, reads))
        titles[identity.__name__] = findings[-1].identity
    # an identity that did not run because its reads raised is reported by what raised, not as "not run"
    blocked = {titles[identity] for _, identity, _ in reads.raised.values()}
    findings = [finding for finding in findings if not (finding.status == NOT_RUN and finding.identity in blocked)]
    findings += reads.failures(titles)
    refuted: dict[tuple[int | None, str], str] = {}
    for finding in findings:
        for at in finding.refuted:
            refuted.setdefault(at, finding.reason)
    if withdraw:
        withdrawn(model, refuted)
    proved = {name for finding in findings if finding.status == HOLDS for name in finding.proved}
    refused = {name for _, name in refuted}
    unproven = tuple(name for name in reads.found if name not in proved and name not in refused and name != "logits")
    return Proof(tuple(findings), refuted, unproven)


def withdrawn(model: StandardModel, refuted: dict[tuple[int | None, str], str]) -> None:
    """Make each refuted value ``Unavailable`` with its reason: ``(layer, "self_attn.attention_output")`` on that block's attention."""
    for (layer, name), reason in refuted.items():
        host = model if layer is None else model.layers[layer]
        *path, value = name.split(".")
        for step in path:
            host = host.__dict__.get(step)
        if host is not None:
            withdraw(host, value, reason)


class _Reads:
    """The prompt's values, read once each: one trace per value over every block, so that one value that raises
    (an operation a release moved) withdraws itself and nothing else."""

    def __init__(self, model: StandardModel, prompt: torch.Tensor) -> None:
        self.model, self.prompt = model, prompt
        self.dtype = computed_in(model._module)
        self.found: dict[str, dict[int | None, torch.Tensor]] = {}
        #: value name -> (the blocks it was read on, the identity it was read for, what it raised and where)
        self.raised: dict[str, tuple[list[int | None], str, str]] = {}
        #: the identity being checked (its function's name): the one a read that raises is reported under
        self.checking = ""
        #: identity (function name) -> the values it asked for
        self.asked: dict[str, set[str]] = {}

    def blocks(self, name: str) -> list[int]:
        """The blocks where ``name`` is available (declared so and not withdrawn)."""
        return [layer for layer in range(self.model.num_layers) if _reason(self.model.layers[layer], name) is None]

    def get(self, name: str) -> dict[int | None, torch.Tensor]:
        """``name`` on every block that has it (the root's, under None, for ``logits``); empty where reading it raised."""
        self.asked.setdefault(self.checking, set()).add(name)
        if name not in self.found and name not in self.raised:
            layers: list[int | None] = [None] if name == "logits" else list(self.blocks(name))
            try:
                self.found[name] = self._trace(name, layers)
            except Exception as error:  # noqa: BLE001 - whatever a read raises (a moved operation, a changed return) refutes it
                self.raised[name] = (
                    layers,
                    self.checking,
                    f"reading {_spelled_on(name, layers)} {raised(error, self.model)}",
                )
        return self.found.get(name, {})

    def _trace(self, name: str, layers: list[int | None]) -> dict[int | None, torch.Tensor]:
        import nnsight

        model = self.model
        with torch.no_grad(), model.trace(self.prompt):
            saved = nnsight.save({})
            for layer in layers:
                host = model if layer is None else model.layers[layer]
                value = _value(host, name)
                # a value that is None on a fresh prompt (the state a first call starts from) reads as None
                saved[layer] = value.detach().clone() if isinstance(value, torch.Tensor) else value
        return dict(saved)

    def failures(self, titles: dict[str, str]) -> list[Finding]:
        """A finding per value whose read raised, under the identity it was read for (``titles``: function name -> its
        title): it is withdrawn where it was asked for, with what raised and where."""
        return [
            Finding(
                titles.get(identity, identity), FAILS, detail, tuple((layer, name) for layer in layers), raised=True
            )
            for name, (layers, identity, detail) in self.raised.items()
        ]


#: the paths of the frames a read passes through that are no operation of the model's: torch's module calls, nnsight's tracing
PLUMBING = tuple(f"{os.sep}{package}{os.sep}" for package in ("torch", "nnsight"))


def raised(error: BaseException, model: StandardModel | None = None) -> str:
    """``raised TYPE in OPERATION (file:line: source) of MODULE: message``: the innermost frame outside torch and nnsight
    (the model's operation, or nnterp's) and the module whose forward ran it, by its path in ``model`` where found."""
    where, module = "", ""
    for frame, line in reversed(list(traceback.walk_tb(error.__traceback__))):
        path = frame.f_code.co_filename
        if not where and not any(part in path for part in PLUMBING):
            source = linecache.getline(path, line).strip()
            source = source if len(source) <= 100 else source[:97] + "..."
            where = f" in {frame.f_code.co_name} ({os.path.basename(path)}:{line}{f': {source}' if source else ''})"
        owner = frame.f_locals.get("self")
        if where and isinstance(owner, torch.nn.Module):
            module = f" of {_module_path(model, owner) or type(owner).__name__}"
            break
    message = str(error).strip().splitlines()
    return f"raised {type(error).__name__}{where}{module}: {message[0] if message else '(no message)'}"


def _module_path(model: StandardModel | None, module: torch.nn.Module) -> str | None:
    root = getattr(model, "_module", None)
    if root is None:
        return None
    found = next((path for path, child in root.named_modules() if child is module), None)
    return None if found is None else f"{found or 'the root'} ({type(module).__name__})"


def _spelled_on(name: str, layers: list[int | None]) -> str:
    if layers == [None]:
        return f"model.{name}"
    return f"{name} on {', '.join(f'layers[{layer}]' for layer in layers)}" if layers else name


def _value(host: Any, dotted: str) -> Any:
    for step in dotted.split("."):
        host = getattr(host, step)
    return host


def _reason(block: Any, dotted: str) -> str | None:
    """Why ``dotted`` is not served on ``block`` (a missing sublayer, a declared reason, a withdrawal), or None."""
    *path, name = dotted.split(".")
    host = block
    for step in path:
        host = host.__dict__.get(step)
        if not isinstance(host, Standard):
            return f"no {step} module"
    declared = type(host).values().get(name)
    return "not declared" if declared is None else declared.reason(host)


#: one comparison the proof makes: the block (None for the root), the value read, the side recomputed, the dtype judged at
Pair = tuple[int | None, torch.Tensor, torch.Tensor, torch.dtype]


def _judge(
    reads: _Reads, identity: Identity, pairs: list[Pair], vouched: tuple[str, ...], why_not: str | None = None
) -> Finding:
    """Hold ``identity`` on each pair; a failure withdraws ``vouched`` on that block.

    With no pair, the identity did not run: ``why_not`` says why (a value the family does not serve, and its reason).
    """
    if not pairs:
        return Finding(identity.title, NOT_RUN, why_not or "no block has the sublayers it is about")
    failed, worst = [], 0.0
    for layer, actual, expected, dtype in pairs:
        verdict = identity.judge(actual, expected, dtype)
        if verdict.ok:
            worst = max(worst, verdict.gap)
        else:
            failed.append((layer, verdict.detail))
    if not failed:
        proved = tuple(dict.fromkeys((*sorted(reads.asked.get(reads.checking, ())), *vouched)))
        return Finding(
            identity.title,
            HOLDS,
            f"on {len(pairs)} {'block' if len(pairs) == 1 else 'blocks'}, largest gap {worst:.3g}",
            proved=proved,
        )
    detail = "; ".join(f"{'the root' if layer is None else f'layers[{layer}]'}: {what}" for layer, what in failed)
    return Finding(identity.title, FAILS, detail, tuple((layer, name) for layer, _ in failed for name in vouched))


def _why_not(model: StandardModel, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` block 0 does not serve, with its reason."""
    for name in names:
        reason = _reason(model.layers[0], name)
        if reason is not None:
            return f"{name} is not served: {reason}"
    return None


def _terms(model: StandardModel, layer: int) -> tuple[str, ...]:
    contributions = getattr(model.layers[layer], "contributions", None)
    return contributions() if contributions is not None else ()


def _sums(reads: _Reads, blocks: dict[int, tuple[str, ...]], target: str) -> list[Pair]:
    """Per block, ``target`` against ``stream_sum(layer_input, its terms)``."""
    values = {
        name: reads.get(name)
        for name in {"layer_input", target, *(term for terms in blocks.values() for term in terms)}
    }
    pairs: list[Pair] = []
    for layer, terms in blocks.items():
        if all(layer in values[name] for name in ("layer_input", target, *terms)):
            parts = [values[name][layer] for name in ("layer_input", *terms)]
            found = values[target][layer]
            pairs.append((layer, found.float(), stream_sum(parts[0], parts[1:]), coarsest(*parts, found)))
    return pairs


def contribution(model: StandardModel, reads: _Reads) -> Finding:
    """layer_input + the block's contributions (each mixer's attention_output, mlp_output) == layer_output."""
    blocks = {}
    for layer in range(model.num_layers):
        terms = _terms(model, layer)
        if terms and all(layer in reads.blocks(name) for name in ("layer_input", "layer_output", *terms)):
            blocks[layer] = terms
    pairs = _sums(reads, blocks, "layer_output") if blocks else []
    vouched = tuple(dict.fromkeys(term for terms in blocks.values() for term in terms))
    why_not = _why_not(model, ("layer_input", "layer_output", *_terms(model, 0)))
    return _judge(reads, CONTRIBUTION, pairs, vouched, why_not)


def mid_stream(model: StandardModel, reads: _Reads) -> Finding:
    """layer_mid == layer_input + the attention_output of every mixer the block has (+ its rescaling of layer_input)."""
    blocks = {}
    for layer in reads.blocks("layer_mid"):
        mid_terms = getattr(model.layers[layer], "mid_terms", None)
        terms = mid_terms() if mid_terms is not None else ()
        if any(term.endswith("attention_output") for term in terms) and all(
            layer in reads.blocks(name) for name in ("layer_input", *terms)
        ):
            blocks[layer] = terms
    pairs = _sums(reads, blocks, "layer_mid") if blocks else []
    return _judge(reads, MID_STREAM, pairs, ("layer_mid",), _why_not(model, ("layer_mid", "layer_input")))


def stream_continuity(model: StandardModel, reads: _Reads) -> Finding:
    """layers[i + 1].layer_input == layers[i].layer_output."""
    inputs, outputs = reads.get("layer_input"), reads.get("layer_output")
    pairs: list[Pair] = [
        (layer + 1, inputs[layer + 1], outputs[layer], reads.dtype)
        for layer in range(model.num_layers - 1)
        if layer in outputs and layer + 1 in inputs
    ]
    return _judge(reads, STREAM_CONTINUITY, pairs, ("layer_input",))


def logits_from_last_layer(model: StandardModel, reads: _Reads) -> Finding:
    """model.logits == model.project_on_vocab(layers[-1].layer_output), in one trace."""
    import nnsight

    last = model.num_layers - 1
    if last not in reads.blocks("layer_output"):
        return Finding(LOGITS_FROM_LAST_LAYER.name, NOT_RUN, "the last block's layer_output is not served")
    try:
        with torch.no_grad(), model.trace(reads.prompt):
            projected = nnsight.save(model.project_on_vocab(model.layers[last].layer_output).detach().clone())
            logits = nnsight.save(model.logits.detach().clone())
    except Exception as error:  # noqa: BLE001 - the projection or the logits raising refutes the projection
        detail = f"reading project_on_vocab(layers[{last}].layer_output) and the logits {raised(error, model)}"
        return Finding(LOGITS_FROM_LAST_LAYER.name, FAILS, detail, ((None, "project_on_vocab"),), raised=True)
    # logits a model upcasts to float32 carry the rounding of the half-precision weights that made them
    pairs: list[Pair] = [(None, projected, logits, coarsest(logits, reads.dtype))]
    return _judge(reads, LOGITS_FROM_LAST_LAYER, pairs, ("project_on_vocab",))


def pattern_is_softmax_of_scores(model: StandardModel, reads: _Reads) -> Finding:
    """softmax(self_attn.attention_scores) == self_attn.attention_probabilities, on attentions without a sink column
    (its logits are weights an offloaded model holds nowhere the proof can read them)."""
    names = ("self_attn.attention_scores", "self_attn.attention_probabilities")
    blocks = [
        layer
        for layer in reads.blocks(names[0])
        if layer in reads.blocks(names[1]) and not getattr(model.layers[layer].self_attn, "sink_column", False)
    ]
    scores, pattern = (reads.get(names[0]), reads.get(names[1])) if blocks else ({}, {})
    pairs: list[Pair] = [
        (layer, pattern[layer], softmax_pattern(scores[layer]).to(pattern[layer].dtype), pattern[layer].dtype)
        for layer in blocks
        if layer in scores and layer in pattern
    ]
    return _judge(reads, PATTERN_IS_SOFTMAX_OF_SCORES, pairs, names, _why_not(model, names))


def head_outputs_are_pattern_against_values(model: StandardModel, reads: _Reads) -> Finding:
    """The attention's mixed heads == attention_probabilities @ repeat_kv(attention_values), seq first."""
    pairs: list[Pair] = []
    mismatched = []
    for layer in reads.blocks("self_attn.attention_values"):
        mixed = f"self_attn.{model.layers[layer].self_attn.mixed_heads}"
        if layer not in reads.blocks("self_attn.attention_probabilities") or layer not in reads.blocks(mixed):
            continue
        values, pattern, heads = (
            reads.get("self_attn.attention_values"),
            reads.get("self_attn.attention_probabilities"),
            reads.get(mixed),
        )
        if not all(layer in found for found in (values, pattern, heads)):
            continue
        try:
            expected = heads_from_pattern(pattern[layer], values[layer])
        except IdentityMismatch as error:
            mismatched.append((layer, str(error)))
            continue
        pairs.append((layer, heads[layer].float(), expected, heads[layer].dtype))
    vouched = ("self_attn.attention_head_outputs",)
    found = _judge(
        reads,
        HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES,
        pairs,
        vouched,
        _why_not(model, ("self_attn.attention_values", "self_attn.attention_probabilities")),
    )
    if not mismatched:
        return found
    detail = "; ".join(f"layers[{layer}]: {what}" for layer, what in mismatched)
    refuted = tuple((layer, name) for layer, _ in mismatched for name in vouched)
    return Finding(
        HEAD_OUTPUTS_ARE_PATTERN_AGAINST_VALUES.title,
        FAILS,
        detail if found.status != FAILS else f"{found.detail}; {detail}",
        (*found.refuted, *refuted),
    )


def neurons_make_contribution(model: StandardModel, reads: _Reads) -> Finding:
    """down_proj(mlp.mlp_neurons) == mlp.mlp_output, on MLPs whose forward returns its down projection's call."""
    blocks = [
        layer
        for layer in reads.blocks("mlp.mlp_neurons")
        if layer in reads.blocks("mlp.mlp_output") and _returns_down_projection(model.layers[layer].mlp)
    ]
    pairs = []
    if blocks:
        import nnsight

        # the projection is an ad hoc call inside the trace, so it runs where the weights are (offloaded, sharded)
        try:
            with torch.no_grad(), model.trace(reads.prompt):
                saved = nnsight.save({})
                for layer in blocks:
                    mlp = model.layers[layer].mlp
                    projected = mlp.down_proj(mlp.mlp_neurons).detach().clone()
                    saved[layer] = (mlp.mlp_output.detach().clone(), projected)
        except Exception as error:  # noqa: BLE001 - reading them raising refutes them, as any other read
            detail = f"reading mlp_output and down_proj(mlp_neurons) on {', '.join(f'layers[{layer}]' for layer in blocks)} {raised(error, model)}"
            return Finding(
                NEURONS_MAKE_CONTRIBUTION.name,
                FAILS,
                detail,
                tuple((layer, "mlp.mlp_neurons") for layer in blocks),
                raised=True,
            )
        pairs = [(layer, output, projected, output.dtype) for layer, (output, projected) in dict(saved).items()]
    why_not = (
        _why_not(model, ("mlp.mlp_neurons", "mlp.mlp_output")) or "no MLP's forward returns its down projection's call"
    )
    vouched = ("mlp.mlp_neurons", "mlp.mlp_activation", "mlp.mlp_output")
    return _judge(reads, NEURONS_MAKE_CONTRIBUTION, pairs, vouched, why_not)


def _returns_down_projection(mlp: Any) -> bool:
    """Whether the MLP's contribution is its own output as it is (the base ``Mlp``'s, not moved nor scaled) and its
    forward ends ``return self.<down_proj>(...)``."""
    if type(mlp).mlp_output is not Mlp.mlp_output or "experts" in mlp.__dict__:
        return False
    down = mlp.__dict__.get("down_proj")
    native = down.path.rsplit(".", 1)[-1] if down is not None else None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(type(mlp._module).forward)))
    except (OSError, TypeError, SyntaxError):
        return False
    bound = {
        node.targets[0].id: node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    returns = [node.value for node in ast.walk(tree) if isinstance(node, ast.Return) and node.value is not None]
    returned = [bound.get(value.id) if isinstance(value, ast.Name) else value for value in returns]
    return (
        len(returned) == 1
        and isinstance(returned[0], ast.Call)
        and isinstance(returned[0].func, ast.Attribute)
        and returned[0].func.attr == native
    )


def every_value_reads(model: StandardModel, reads: _Reads) -> Finding:
    """Every other value the blocks serve reads on the prompt; one that raises (an operation a release moved, a kernel
    routed another way) is withdrawn with what raised. Reading proves no meaning: what reads and no identity vouches
    for is the proof's ``unproven``."""
    names = [
        name
        for name in blocks_support(model.layers)
        if name not in reads.found and name not in reads.raised and reads.blocks(name)
    ]
    for name in names:
        reads.get(name)
    read = [name for name in names if name in reads.found]
    if not names:
        return Finding("every_value_reads", NOT_RUN, "every value the blocks serve was read by an identity above")
    return Finding(
        "every_value_reads (each other value the blocks serve reads on the prompt)",
        HOLDS,
        f"{len(read)} of {len(names)} more values read",
    )


#: the identities, in the order they run
IDENTITIES = (
    contribution,
    mid_stream,
    stream_continuity,
    logits_from_last_layer,
    pattern_is_softmax_of_scores,
    head_outputs_are_pattern_against_values,
    neurons_make_contribution,
    every_value_reads,
)


def _spelled(at: tuple[int | None, str]) -> str:
    layer, name = at
    return f"model.{name}" if layer is None else f"layers[{layer}].{name}"
