"""The kit holds a registered checkpoint's skips to its family's declaration: undeclared, passing or re-reasoned skips fail."""

import dataclasses

import pytest
from _pytest.outcomes import Skipped
from nnterp import registry
from nnterp_conformance.suite import BaseConformance


@pytest.fixture
def declaring(monkeypatch):
    """Make the family of ``checkpoint`` declare ``skips`` for it instead of what it declares."""

    def declare(checkpoint, skips):
        found = registry.family_named
        family = found(registry.checkpoint_family(checkpoint))
        changed = dataclasses.replace(family, skips={**family.skips, checkpoint: skips})
        monkeypatch.setattr(registry, "family_named", lambda name: changed if name == family.name else found(name))

    return declare


def test_a_declared_skip_skips(tiny_model, nnterp_profile):
    # openai-gpt is post-LN: the family declares that its contributions do not exist, and the check skips for that
    with pytest.raises(Skipped, match="post-LN"):
        BaseConformance().test_check(tiny_model("openai-gpt"), "openai-gpt", "contribution", nnterp_profile)


def test_a_skip_the_family_does_not_declare_fails(tiny_model, nnterp_profile, declaring):
    model = tiny_model("openai-gpt")  # loaded before the family is changed: the session's cache keeps the real one
    declaring("openai-gpt", {})
    with pytest.raises(AssertionError, match="contribution skipped .* and its family declares no such skip"):
        BaseConformance().test_check(model, "openai-gpt", "contribution", nnterp_profile)


def test_a_skip_for_another_reason_fails(tiny_model, nnterp_profile, declaring):
    model = tiny_model("openai-gpt")
    declaring("openai-gpt", {"contribution": "a parallel block"})
    with pytest.raises(AssertionError, match="its family says for 'a parallel block'"):
        BaseConformance().test_check(model, "openai-gpt", "contribution", nnterp_profile)


def test_a_declared_skip_that_passes_fails(tiny_model, nnterp_profile, declaring):
    model = tiny_model("llama")
    declaring("llama", {"contribution": "a post-LN block"})
    with pytest.raises(AssertionError, match="contribution passes, yet its family declares it skips"):
        BaseConformance().test_check(model, "llama", "contribution", nnterp_profile)


@pytest.mark.parametrize("drawn", [True, False])
def test_a_check_kept_to_the_fixed_prompts_runs_once(tiny_model, nnterp_profile, monkeypatch, drawn):
    from nnterp_conformance.checks import base

    calls = []

    def counted(model, case):
        calls.append(case)
        return "counted"

    monkeypatch.setitem(base.CHECKS, "contribution", base.Check("contribution", counted, "residual", "counted", drawn=drawn))
    BaseConformance().test_check(tiny_model("llama"), "llama", "contribution", nnterp_profile)
    # the fixed prompts, then (unless kept to them) the profile's drawn cases
    assert (len(calls) == 1) is not drawn and len(calls) >= 1


def test_every_declared_skip_names_a_check_that_applies_to_its_checkpoint():
    # a check that does not apply is never generated, so a skip declared for one would be held to nothing
    from nnterp_conformance.applicability import applicable

    stale = {
        checkpoint: sorted(set(declared) - set(applicable(checkpoint)))
        for checkpoint in registry.checkpoint_names()
        for declared in [registry.family_named(registry.checkpoint_family(checkpoint)).skips.get(checkpoint, {})]
        if set(declared) - set(applicable(checkpoint))
    }
    assert not stale, f"skips declared for checks that do not apply (remove them from the family's skips): {stale}"
