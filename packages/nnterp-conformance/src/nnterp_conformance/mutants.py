"""Wrong families on purpose: a real family with one value moved where a careless author, or a moved operation, would
put it, and the check that must fail on it. The kit is as strong as the mutants it kills.

``standard_mutants(checkpoint)`` proposes the mistakes any family can make (queries and keys swapped, the pattern read
at the scores, the values read as the keys, one norm's output for another); a family's tests add the ones its own
arithmetic invites (the project's are in ``packages/nnterp-text/tests/test_mutants.py``); ``hooks_path_mutants(checkpoint)``
the mistakes of the toolkit's hooks path the checkpoint's values are read through (a ``Mutant``'s ``patches``);
``toolkit_mutants(checkpoint)`` the mistakes of the toolkit's TransformerLens table and cache groups. ``killed(mutant)`` runs the
mutant's check on the family and on the mutant::

    from nnterp_conformance.mutants import killed, standard_mutants

    for mutant in standard_mutants("my_model"):
        print(mutant.name, killed(mutant))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Mutant:
    """A checkpoint loaded with one component changed, the check that must fail on it, and why it is wrong."""

    #: a short name, ``<checkpoint>: <what moved>``
    name: str
    checkpoint: str
    #: the components swapped in, keyed as a family's ``envoys`` are (an envoy path or a module type)
    envoys: Mapping[Any, type] = field(repr=False)
    #: the check that must pass on the family and fail on the mutant
    check: str
    #: a fragment of that failure's detail: the identity it names
    message: str
    #: the mistake, in one line
    reason: str
    #: what the checkpoint is loaded with besides its own keyword arguments (``{"dtype": torch.bfloat16}``)
    load: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: attributes of nnterp's own code replaced while the mutant is judged, ``(owner, attribute) -> replacement``: a
    #: mistake in a path the family's values are read through (the toolkit's hooks path) rather than in a component
    patches: Mapping[tuple[Any, str], Any] = field(default_factory=dict, repr=False)


def moved(component: type, reason: str, called: str | None = None, **values: Any) -> type:
    """``component`` with each named value read as another value of it (a name) or at another path (an ``EProperty``).

    The class is ``called`` (default ``Mutated<component>``); ``reason`` is its docstring.
    """
    body: dict[str, Any] = {"__doc__": reason, "__module__": __name__}
    for name, source in values.items():
        descriptor = getattr(component, source).at() if isinstance(source, str) else source
        descriptor.name = name
        body[name] = descriptor
    return type(called or f"Mutated{component.__name__}", (component,), body)


def _components(checkpoint: str) -> tuple[Any, Any]:
    """The model, and its first block as its family builds it."""
    from .runner import load

    model = load(checkpoint)
    return model, model.layers[0]


def _differ(model: Any, envoy: Any, first: str, second: str) -> bool:
    """Whether ``envoy``'s values ``first`` and ``second`` read different tensors on a short prompt (a mutant serving
    one as the other is then wrong). One trace each: no forward order is assumed between them."""
    import torch

    found = []
    for name in (first, second):
        with torch.no_grad(), model.trace("Hello world"):
            found.append(getattr(envoy, name).save())
    return found[0].shape != found[1].shape or not torch.equal(*found)


def _available(envoy: Any, *names: str) -> bool:
    support = envoy.support()
    return all(name in support and support[name] is None for name in names)


def standard_mutants(checkpoint: str) -> list[Mutant]:
    """The mistakes any family's attention, norms, stream, MLP and mixture can be given, on ``checkpoint``, each with the
    check that kills it; a mistake that reads the same tensor on this family (one norm for both sublayers, an ungated
    MLP's activation and neurons) is not proposed."""
    model, block = _components(checkpoint)
    mutants: list[Mutant] = []

    def on(
        envoy: Any, what: str, check: str, message: str, reason: str, component: type | None = None, **values: Any
    ) -> None:
        """A mutant of ``envoy``'s component: ``component`` given, else the component with ``values`` moved."""
        wrong = component or moved(type(envoy), reason, **values)
        mutants.append(
            Mutant(f"{checkpoint}: {what}", checkpoint, {type(envoy._module): wrong}, check, message, reason)
        )

    if "self_attn" in block.__dict__:
        _attention_mutants(block.self_attn, on)
    _stream_mutants(model, block, on)
    if "mlp" in block.__dict__:
        _mlp_mutants(model, block.mlp, on)
    if "vision" in model.__dict__ and model.vision.num_layers and "self_attn" in model.vision.layers[0].__dict__:
        _attention_mutants(model.vision.layers[0].self_attn, on, TOWER_ATTENTION, who="tower ")
    return _judged_here(model, mutants)


def _judged_here(model: Any, mutants: list[Mutant]) -> list[Mutant]:
    """The mutants whose check passes on the family: one that skips there (a value it needs is Unavailable) judges nothing."""
    from .checks import verdict
    from .runner import PROMPTS

    passing = {check: verdict(check, model, PROMPTS).status == "pass" for check in {mutant.check for mutant in mutants}}
    return [mutant for mutant in mutants if passing[mutant.check]]


#: the checks that judge an attention's values, on a text block and on a vision tower's
TEXT_ATTENTION = {
    "scores": "scores_are_queries_against_keys",
    "heads": "head_outputs_are_pattern_against_values",
    "pattern": "pattern_is_softmax_of_scores",
    "contribution": "contribution",
}
TOWER_ATTENTION = {name: f"vision_{check}" for name, check in TEXT_ATTENTION.items()}


def _attention_mutants(
    attention: Any, on: Callable[..., None], checks: dict[str, str] = TEXT_ATTENTION, who: str = ""
) -> None:
    """The attention's mistakes: two values of one layout served for each other, the contribution before the projection.

    ``checks`` names the check judging each (a tower's own, ``TOWER_ATTENTION``), ``who`` prefixes the mutants' names.
    """
    if not _available(attention, "attention_queries", "attention_keys", "attention_scores", "attention_values"):
        return
    on(
        attention,
        f"{who}queries and keys swapped",
        checks["scores"],
        "queries @ keys^T",
        "the queries served as the keys and the keys as the queries: with as many key heads as query heads the shapes agree",
        attention_queries="attention_keys",
        attention_keys="attention_queries",
    )
    on(
        attention,
        f"{who}values read as keys",
        checks["heads"],
        "attention_probabilities @ attention_values",
        "attention_values pointed at the keys' operation: the same layout, another tensor",
        attention_values="attention_keys",
    )
    on(
        attention,
        f"{who}pattern read at the scores",
        checks["pattern"],
        "softmax(attention_scores) against attention_probabilities",
        "attention_probabilities pointed at the softmax's input instead of its output",
        attention_probabilities="attention_scores",
    )
    on(
        attention,
        f"{who}scores read at the pattern",
        checks["scores"],
        "queries @ keys^T",
        "attention_scores pointed at the softmax's output instead of its input",
        attention_scores="attention_probabilities",
    )
    if "o_proj" in attention.__dict__:
        on(
            attention,
            f"{who}contribution read before the output projection",
            checks["contribution"],
            "against layer_output",
            "attention_output pointed at what o_proj receives, the joined heads, instead of what it returns",
            attention_output=type(attention).attention_output.at("o_proj.input", select=None),
        )


def _stream_mutants(model: Any, block: Any, on: Callable[..., None]) -> None:
    """The residual stream's and the norms' mistakes: a boundary read at the wrong side of a sublayer, one norm for the other."""
    if _available(block, "attention_norm_output", "mlp_norm_output") and _differ(
        model, block, "attention_norm_output", "mlp_norm_output"
    ):
        on(
            block,
            "mlp_norm_output read at the attention's norm",
            "norm_outputs_feed_the_sublayers",
            "mlp_norm_output against",
            "mlp_norm_output pointed at the attention's norm: the same layout, the wrong sublayer's input",
            mlp_norm_output="attention_norm_output",
        )
    if _available(block, "layer_mid", "layer_output") and "mlp" in block.__dict__:
        on(
            block,
            "layer_output read at the mid stream",
            "contribution",
            "against layer_output",
            "layer_output pointed at the stream between the sublayers, before the MLP adds to it",
            layer_output="layer_mid",
        )
        on(
            block,
            "layer_mid read at the block's input",
            "mid_stream",
            "against layer_mid",
            "layer_mid pointed at the stream entering the block, before the attention adds to it",
            layer_mid="layer_input",
        )
    if _available(block, "layer_input", "layer_output") and model.num_layers > 1:
        on(
            block,
            "layer_input read at the block's output",
            "stream_continuity",
            "layer_input against layers[",
            "layer_input pointed at what the block returns instead of what it receives: each block off by one",
            layer_input="layer_output",
        )
    if _available(block, "layer_output"):
        on(
            block,
            "layer_output served detached",
            "gradients_are_derivatives",
            "is not on the path",
            "layer_output served as value.detach(): the same numbers and storage, so sums and in-place edits hold, but no "
            "gradient reaches it",
            layer_output=_detached(type(block).layer_output),
        )
    if _available(block, "layer_input", "attention_norm_output"):
        on(
            block,
            "layer_input read at the attention norm",
            "contribution",
            "against layer_output",
            "layer_input pointed at the first norm's output, what the attention reads, instead of the stream itself",
            layer_input="attention_norm_output",
        )


def multi_stream_mutants(checkpoint: str) -> list[Mutant]:
    """The mistakes a multi-stream family (several residual streams per token, ``StreamLayer``) invites, on
    ``checkpoint``, each with the check that kills it: a stream read before the sublayer's output is spread and the
    streams mixed, the collapse and spread weights swapped, one stream served for all, the mixing read untransposed."""
    model, block = _components(checkpoint)
    mutants: list[Mutant] = []

    def on(what: str, check: str, message: str, reason: str, **values: Any) -> None:
        mutants.append(
            Mutant(
                f"{checkpoint}: {what}",
                checkpoint,
                {type(block._module): moved(type(block), reason, **values)},
                check,
                message,
                reason,
            )
        )

    component = type(block)
    if _available(block, "layer_input", "layer_mid"):
        on(
            "layer_mid read before the attention's mixing",
            "streams_follow_from_mixing",
            "against layer_mid",
            "layer_mid pointed at the streams entering the block, before the attention's output is spread over them and they are mixed",
            layer_mid="layer_input",
        )
    if _available(block, "attention_collapse_weights", "attention_spread_weights"):
        on(
            "collapse and spread weights swapped",
            "sublayers_read_the_collapse",
            "against attention_collapsed",
            "the hyper-connection's pre weights served as the post weights and the post as the pre: the same layout, the other side of the sublayer",
            attention_collapse_weights="attention_spread_weights",
            attention_spread_weights="attention_collapse_weights",
        )
    if _available(block, "layer_output"):
        on(
            "one stream served for all",
            "streams_follow_from_mixing",
            "against layer_output",
            "layer_output served as its first stream repeated over the streams axis: right on a block whose streams start equal, wrong after",
            layer_output=_first_stream(component.layer_output),
        )
    if _available(block, "attention_stream_mixing"):
        # the streams the mixing reaches: layer_mid past a hyper-connection, layer_output past AltUp's one step
        after = next(
            (
                values["after"]
                for values in component.STREAM_STEPS.values()
                if values.get("mixing") == "attention_stream_mixing"
            ),
            "layer_mid",
        )
        on(
            "stream mixing read untransposed",
            "streams_follow_from_mixing",
            f"against {after}",
            "attention_stream_mixing served transposed: the model mixes by comb^T, sum_j comb[j, k] * streams[j], and Sinkhorn's matrix is not symmetric",
            attention_stream_mixing=_transposed(component.attention_stream_mixing),
        )
    return _judged_here(model, mutants)


def _first_stream(value: Any) -> Any:
    """``value`` (a ``Streams`` value) served as its first stream repeated over the streams axis."""
    return value.reading(lambda envoy, streams: _first_of(streams))


def _first_of(streams: Any) -> Any:
    """``[batch, seq, num_streams, hidden]`` streams as their first repeated (in the served layout, whatever the model's)."""
    return streams[:, :, :1].expand_as(streams)


def _transposed(value: Any) -> Any:
    """``value`` (a ``StreamMixing`` value) served transposed over its two streams axes."""
    return value.reading(lambda envoy, mixing: mixing.transpose(-1, -2))


def _detached(value: Any) -> Any:
    """``value`` served off autograd's record: what a careless preprocess ending in ``.detach()`` serves."""
    return value.reading(lambda envoy, read: read.detach())


def _mlp_mutants(model: Any, mlp: Any, on: Callable[..., None]) -> None:
    """The MLP's and the mixture's mistakes: a value one operation off, or a routing declared as a sibling's."""
    if _available(mlp, "mlp_output"):
        on(
            mlp,
            "mlp_output read at the MLP's input",
            "contribution",
            "against layer_output",
            "mlp_output pointed at what the MLP is called with, the norm's output, instead of what it returns",
            mlp_output=type(mlp).mlp_output.at("input", select=None),
        )
    if _available(mlp, "mlp_activation", "mlp_neurons") and _differ(model, mlp, "mlp_activation", "mlp_neurons"):
        on(
            mlp,
            "neurons read at the activation",
            "neurons_make_contribution",
            "against mlp_neurons",
            "mlp_neurons pointed at act_fn's output: on a gated MLP that misses the up projection it is multiplied by",
            mlp_neurons="mlp_activation",
        )
    if _available(mlp, "expert_weights", "router_logits"):
        reason = "the routing declared as a sibling's: the chosen weights renormalized where the router does not, or not where it does"
        component = type(mlp)
        flipped = type(
            f"Mutated{component.__name__}",
            (component,),
            {"__doc__": reason, "normalizes": lambda self: not component.normalizes(self)},
        )
        on(
            mlp,
            "routing renormalization flipped",
            "routing_follows_scoring",
            "against route(router_logits)",
            reason,
            component=flipped,
        )
    if _available(mlp, "shared_expert_output", "routed_output", "mixture_output"):
        on(
            mlp,
            "routed_output read at the mixture's output",
            "mixture_adds_up",
            "against mixture_output",
            "routed_output pointed at the mixture's output, which already holds the shared expert's share",
            routed_output="mixture_output",
        )


def hooks_path_mutants(checkpoint: str) -> list[Mutant]:
    """The mistakes the toolkit's hooks path (``nnterp.toolkit._hooks``) can be given, on ``checkpoint``, each killed by
    ``hooks_path_reads_the_traced_values``, the one check that runs that path: the model called with the tokenizer's
    batch as it is, not with the inputs a trace builds (``_batch``: a left-padded row's positions numbered from its
    first real token, the family's position shift, the model's dtype). Proposed where the check passes on the family."""
    from nnterp.toolkit import _hooks

    model, _ = _components(checkpoint)
    reason = (
        "the hooks path calls the model with the tokenizer's input_ids and attention_mask as they are: a left-padded row's "
        "positions then count its padding, where the trace numbers them from its first real token"
    )
    mutants = [
        Mutant(
            f"{checkpoint}: hooks path called with the tokenizer's batch",
            checkpoint,
            {},
            "hooks_path_reads_the_traced_values",
            "reads another tensor than the trace",
            reason,
            patches={(_hooks, "model_inputs"): _as_tokenized},
        ),
    ]
    return _judged_here(model, mutants)


def _as_tokenized(model: Any, inputs: tuple, kwargs: dict | None = None) -> tuple[tuple, dict]:
    """``_hooks.model_inputs`` written carelessly: the invoke's tokenizer batch handed to the model as it is, on its device."""
    (batch,) = inputs
    device = model.device
    return (), {key: value.to(device) if device is not None else value for key, value in batch.items()}


def toolkit_mutants(checkpoint: str) -> list[Mutant]:
    """The mistakes the toolkit's mappings can be given, on ``checkpoint``: a TransformerLens hook pointed at the wrong
    standard value or served in the standard layout (``nnterp.toolkit.names.HOOKS``), the cache's contributions group
    expanded as two terms where the block adds more. Each is killed by ``toolkit_names_read_their_values`` or
    ``toolkit_groups_sum_to_the_stream``; proposed where the mistake reads another tensor and the check passes on the family."""
    from nnterp.toolkit import cache

    model, block = _components(checkpoint)
    mutants: list[Mutant] = []

    def on(what: str, check: str, message: str, reason: str, patches: dict) -> None:
        mutants.append(Mutant(f"{checkpoint}: {what}", checkpoint, {}, check, message, reason, patches=patches))

    if _available(block, "layer_mid", "mlp_input") and _differ(model, block, "layer_mid", "mlp_input"):
        on(
            "hook_mlp_in mapped to the MLP's normed input",
            "toolkit_names_read_their_values",
            "hook_mlp_in against hook_resid_mid",
            "the table maps hook_mlp_in to mlp_input, what the MLP is called with after its norm, instead of the stream the norm reads",
            _row_changed("hook_mlp_in", standard="mlp_input", unless=()),
        )
    if "self_attn" in block.__dict__ and _available(block.self_attn, "attention_values"):
        from nnterp.toolkit.names import SAME

        on(
            "attn.hook_v served without its transpose",
            "toolkit_names_read_their_values",
            "attn.hook_v",
            "the table serves attn.hook_v in the standard [batch, heads, seq, head_dim] layout, not TransformerLens's "
            "[batch, pos, head, d_head]: silent in shape wherever heads equal positions",
            _row_changed("attn.hook_v", layout=SAME),
        )
    declared = [getattr(model.layers[index], "contributions", None) for index in range(model.num_layers)]
    if any(terms is not None and tuple(terms()) != _TWO_TERMS for terms in declared):
        on(
            "the cache's contributions as attention_output + mlp_output",
            "toolkit_groups_sum_to_the_stream",
            "the cache's contributions",
            "the cache expands layers.*.contributions as attention_output + mlp_output on every block instead of the block's "
            "contributions(): a rescaled residual's or a per-layer input's terms dropped",
            {(cache, "_block_terms"): _two_terms},
        )
    return _judged_here(model, mutants)


#: the two terms a careless cache takes every block to add
_TWO_TERMS = ("self_attn.attention_output", "mlp.mlp_output")


def _two_terms(model: Any, index: int) -> tuple[str, ...]:
    """``cache._block_terms`` written carelessly: every block taken to add its attention's and its MLP's outputs alone."""
    return _TWO_TERMS


def _row_changed(name: str, **changes: Any) -> dict[tuple[Any, str], Any]:
    """Patches that give TransformerLens's hook ``name`` (block-relative) a row with ``changes`` in ``HOOKS`` and the
    lookup ``standard_name`` translates with."""
    import dataclasses

    from nnterp.toolkit import names

    rows = tuple(dataclasses.replace(hook, **changes) if hook.name == name else hook for hook in names.HOOKS)
    return {(names, "HOOKS"): rows, (names, "_BY_NAME"): {hook.name: hook for hook in rows}}


def killed(mutant: Mutant, case: Any = None) -> Any:
    """The verdict of the mutant's check on the mutant (after it passed on the family); a kill is a failure naming its identity."""
    from nnterp.registry import checkpoint_family, family_named

    from .checks import verdict
    from .runner import PROMPTS, load
    from .variants import with_envoys

    case = PROMPTS if case is None else case
    passed = verdict(mutant.check, load(mutant.checkpoint, **mutant.load), case)
    if passed.status != "pass":
        raise AssertionError(f"{mutant.name}: {mutant.check} does not pass on the family itself: {passed}")
    family = with_envoys(
        family_named(checkpoint_family(mutant.checkpoint)), dict(mutant.envoys), name=f"mutant_{mutant.checkpoint}"
    )
    model = load(mutant.checkpoint, family=family, **mutant.load)
    with patched(mutant.patches):
        return verdict(mutant.check, model, case)


@contextmanager
def patched(patches: Mapping[tuple[Any, str], Any]) -> Iterator[None]:
    """Each ``(owner, attribute)`` of ``patches`` set to its replacement for the block, then put back."""
    kept = [(owner, attribute, getattr(owner, attribute)) for owner, attribute in patches]
    try:
        for (owner, attribute), replacement in patches.items():
            setattr(owner, attribute, replacement)
        yield
    finally:
        for owner, attribute, original in reversed(kept):
            setattr(owner, attribute, original)


def score(mutants: list[Mutant], progress: Callable[[Mutant, Any], None] | None = None) -> tuple[int, int]:
    """How many of ``mutants`` their checks kill (fail naming ``message``), and how many there are."""
    kills = 0
    for mutant in mutants:
        found = killed(mutant)
        kills += found.status == "fail" and mutant.message in found.detail
        if progress is not None:
            progress(mutant, found)
    return kills, len(mutants)
