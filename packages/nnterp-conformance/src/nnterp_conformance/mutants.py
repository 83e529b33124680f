"""Wrong families on purpose: a real family with one value moved where a careless author, or a moved operation, would
put it, and the check that must fail on it. The kit is as strong as the mutants it kills.

``standard_mutants(checkpoint)`` proposes the mistakes any family can make (queries and keys swapped, the pattern read
at the scores, the values read as the keys, one norm's output for another); a family's tests add the ones its own
arithmetic invites (the project's are in ``packages/nnterp-text/tests/test_mutants.py``). ``killed(mutant)`` runs the
mutant's check on the family and on the mutant::

    from nnterp_conformance.mutants import killed, standard_mutants

    for mutant in standard_mutants("my_model"):
        print(mutant.name, killed(mutant))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


def moved(component: type, reason: str, **values: Any) -> type:
    """``component`` with each named value read as another value of it (a name) or at another path (an ``EProperty``)."""
    body: dict[str, Any] = {"__doc__": reason, "__module__": __name__}
    for name, source in values.items():
        descriptor = getattr(component, source).at() if isinstance(source, str) else source
        descriptor.name = name
        body[name] = descriptor
    return type(f"Mutated{component.__name__}", (component,), body)


def _components(checkpoint: str) -> tuple[Any, Any, Any]:
    """The model, and the attention and block envoys of its first block, as its family builds them."""
    from .runner import load

    model = load(checkpoint)
    block = model.layers[0]
    return model, block.self_attn, block


def _one_norm(model: Any, block: Any) -> bool:
    """Whether the block's attention and MLP read the same norm's output (a parallel block's one norm)."""
    import torch

    with torch.no_grad(), model.trace("Hello world"):
        attention = block.attention_norm_output.save()
        mlp = block.mlp_norm_output.save()
    return torch.equal(attention, mlp)


def standard_mutants(checkpoint: str) -> list[Mutant]:
    """The mistakes any family's attention and norms can be given, on ``checkpoint``, each with the check that kills it."""
    model, attention, block = _components(checkpoint)
    component, module = type(attention), type(attention._module)
    layer, block_module = type(block), type(block._module)

    def on_attention(what: str, check: str, message: str, reason: str, **values: Any) -> Mutant:
        return Mutant(f"{checkpoint}: {what}", checkpoint, {module: moved(component, reason, **values)}, check, message, reason)

    mutants = [
        on_attention(
            "queries and keys swapped", "scores_are_queries_against_keys", "queries @ keys^T",
            "the queries served as the keys and the keys as the queries: with as many key heads as query heads the shapes agree",
            attention_queries="attention_keys", attention_keys="attention_queries",
        ),
        on_attention(
            "values read as keys", "head_outputs_are_pattern_against_values", "attention_probabilities @ attention_values",
            "attention_values pointed at the keys' operation: the same layout, another tensor",
            attention_values="attention_keys",
        ),
        on_attention(
            "pattern read at the scores", "pattern_is_softmax_of_scores", "softmax(attention_scores) against attention_probabilities",
            "attention_probabilities pointed at the softmax's input instead of its output",
            attention_probabilities="attention_scores",
        ),
        on_attention(
            "scores read at the pattern", "scores_are_queries_against_keys", "queries @ keys^T",
            "attention_scores pointed at the softmax's output instead of its input",
            attention_scores="attention_probabilities",
        ),
    ]
    if _one_norm(model, block):
        return mutants  # a parallel block's sublayers read one norm: the attention's is the MLP's
    reason = "mlp_norm_output pointed at the attention's norm: the same layout, the wrong sublayer's input"
    mutants.append(
        Mutant(
            f"{checkpoint}: mlp_norm_output read at the attention's norm", checkpoint,
            {block_module: moved(layer, reason, mlp_norm_output="attention_norm_output")},
            "norm_outputs_feed_the_sublayers", "mlp_norm_output against", reason,
        )
    )
    return mutants


def killed(mutant: Mutant, case: Any = None) -> Any:
    """The verdict of the mutant's check on the mutant (after it passed on the family); a kill is a failure naming its identity."""
    from nnterp.registry import checkpoint_family, family_named

    from .checks import verdict
    from .runner import PROMPTS, load
    from .variants import with_envoys

    case = PROMPTS if case is None else case
    passed = verdict(mutant.check, load(mutant.checkpoint), case)
    if passed.status != "pass":
        raise AssertionError(f"{mutant.name}: {mutant.check} does not pass on the family itself: {passed}")
    family = with_envoys(family_named(checkpoint_family(mutant.checkpoint)), dict(mutant.envoys), name=f"mutant_{mutant.checkpoint}")
    return verdict(mutant.check, load(mutant.checkpoint, family=family), case)


def score(mutants: list[Mutant], progress: Callable[[Mutant, Any], None] | None = None) -> tuple[int, int]:
    """How many of ``mutants`` their checks kill (fail naming ``message``), and how many there are."""
    kills = 0
    for mutant in mutants:
        found = killed(mutant)
        kills += found.status == "fail" and mutant.message in found.detail
        if progress is not None:
            progress(mutant, found)
    return kills, len(mutants)
