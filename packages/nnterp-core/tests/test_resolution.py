"""A checkpoint no family names: served by its classes, or by a family inferred from its tree and proven at load."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import nnterp  # noqa: F401 - nnsight before transformers.models
from nnterp import StandardizedTransformer, Unavailable
from nnterp.errors import FamilyNotFound, UnprovenFamily
from nnterp.proof import IDENTITIES
from nnterp_conformance.checkpoints import build_tokenizer, tiny_checkpoint
from nnterp_conformance.unregistered import written


def loaded(path: str, **kwargs) -> tuple[StandardizedTransformer, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnprovenFamily)
        model = StandardizedTransformer(path, **kwargs)
    return model, [warning for warning in caught if issubclass(warning.category, UnprovenFamily)]


# -- by class ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checkpoint", "family", "klass"),
    [
        ("exaone", "default", "LlamaForCausalLM"),
        ("sarvam_mla", "deepseek_v3", "DeepseekV3ForCausalLM"),
        ("param2moe", "deepseek_v3", "Glm4MoeForCausalLM"),  # 5.25: Param2's config over GLM-4-MoE's classes
    ],
)
def test_a_config_only_type_loads_with_the_family_serving_its_classes(checkpoint, family, klass):
    from nnterp.registry import _entry

    path = tiny_checkpoint(checkpoint)
    assert _entry("model_types", checkpoint) is None  # no family names the type: the classes are what serve it
    model, proofs = loaded(path)
    assert model.family.name == family and not proofs
    assert klass in model.family.resolution and repr(checkpoint) in model.family.resolution
    with torch.no_grad(), model.trace("Hello world"):
        total = model.layers[0].layer_input + model.layers[0].self_attn.attention_output + model.layers[0].mlp.mlp_output
        gap = (total - model.layers[0].layer_output).abs().max().save()
    assert gap < 1e-5


# -- inferred ---------------------------------------------------------------------------------------------


def test_a_renamed_llama_gets_an_inferred_family_whose_identities_hold(tmp_path):
    model, proofs = loaded(written(tmp_path), attn_implementation="eager")
    assert model.family.inferred and "pre-norm blocks body.blocks.*" in model.family.resolution
    assert len(proofs) == 1 and "pre-norm block (Llama's)" in str(proofs[0].message)
    statuses = {finding.identity.split(" ")[0]: finding.status for finding in model.proof.findings}
    assert model.proof.holds and statuses == dict.fromkeys(statuses, "holds"), model.proof
    assert len(statuses) == len(IDENTITIES)
    # every value the inferred Llama serves is proved by an identity or named unproven: the norms' outputs, the MLP's
    # input, the queries and keys read, and no identity at load ties them to the rest
    unproven = {"attention_norm_output", "mlp_norm_output", "mlp_input", "self_attn.attention_queries", "self_attn.attention_keys"}
    assert set(model.proof.unproven) == unproven and "self_attn.attention_probabilities" in model.proof.proved
    with torch.no_grad(), model.trace("Hello world"):
        pattern = model.layers[1].self_attn.attention_probabilities.save()
        neurons = model.layers[1].mlp.mlp_neurons.save()
        logits = model.logits.save()
    assert pattern.shape[1] == 4 and torch.allclose(pattern.sum(-1), torch.ones(()))
    assert neurons.shape[-1] == 128 and logits.shape[-1] == 320


def test_a_leaky_attention_fails_its_proof_and_its_contributions_say_which_identity(tmp_path):
    model, proofs = loaded(written(tmp_path, leaky=True))
    assert model.family.inferred and len(proofs) == 1
    assert not model.proof.holds
    reason = model.support()["self_attn.attention_output"]
    assert set(reason) == {0, 1, 2} and "contribution" in reason[0] and "off by" in reason[0]
    assert "contribution" in str(proofs[0].message)
    with pytest.raises(Unavailable, match="contribution"), model.trace("Hello world"):
        model.layers[0].mlp.mlp_output.save()
    # what held is still served
    assert model.support()["layer_output"] is None
    with torch.no_grad(), model.trace("Hello world"):
        stream = model.layers[2].layer_output.save()
    assert stream.shape[-1] == 64


def test_a_tree_no_structure_fits_names_what_it_found_and_what_is_missing():
    from nnterp.inference import infer

    class Flat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 4)

    with pytest.raises(FamilyNotFound, match=r"missing a list of identical blocks.*adding-a-family"):
        infer(Flat(), "flat")


def test_a_family_owns_the_classes_its_types_define_and_not_those_a_config_only_type_borrows():
    from nnterp.registry import indexed, own_classes

    assert "LlamaForCausalLM" in own_classes("llama") and own_classes("exaone") == ()
    assert indexed().model_classes["LlamaForCausalLM"] == "default"
    assert indexed().model_classes["DeepseekV3ForCausalLM"] == "deepseek_v3"


def test_a_module_whose_base_class_a_family_serves_loads_with_that_family():
    from transformers import LlamaConfig, LlamaForCausalLM

    class MyConfig(LlamaConfig):
        model_type = "my_llama"

    class MyLlama(LlamaForCausalLM):
        config_class = MyConfig

    mine = MyLlama(MyConfig(**LlamaConfig.from_pretrained(tiny_checkpoint("llama")).to_dict()))
    model, proofs = loaded(mine, tokenizer=build_tokenizer())
    assert model.family.name == "default" and "LlamaForCausalLM" in model.family.resolution and not proofs


# -- verify -----------------------------------------------------------------------------------------------


def test_verify_proves_a_registered_family_and_withdraws_nothing_that_holds():
    model, proofs = loaded(tiny_checkpoint("llama"), verify=True, attn_implementation="eager")
    assert model.proof.holds and not proofs
    assert {finding.status for finding in model.proof.findings} == {"holds"}


def test_a_release_outside_the_proven_series_proves_at_load(monkeypatch):
    from nnterp import transformer

    monkeypatch.setattr(transformer, "unproven", lambda: ["transformers 5.99.0 (proven: 5.24.x)"])
    model, proofs = loaded(tiny_checkpoint("gpt2"))
    assert model.proof is not None and model.proof.holds
    assert len(proofs) == 1 and "transformers 5.99.0" in str(proofs[0].message)
    unasked, none = loaded(tiny_checkpoint("gpt2"), verify=False)
    assert unasked.proof is None and not none


@pytest.mark.parametrize(
    ("checkpoint", "layout", "refuted"),
    [
        ("phi", "parallel, one norm", set()),
        ("nnterp_toy", "sandwich", set()),
        # Gemma-2 caps its logits: the inferred family's plain projection is refuted, and only it
        ("gemma2", "sandwich", {(None, "project_on_vocab")}),
    ],
)
def test_an_inferred_family_reads_each_layout_and_its_proof_withdraws_only_what_fails(checkpoint, layout, refuted):
    from nnterp.inference import infer
    from transformers import AutoModelForCausalLM

    path = tiny_checkpoint(checkpoint)
    family = infer(AutoModelForCausalLM.from_pretrained(path), checkpoint)
    assert f"({layout} blocks" in family.resolution
    model, _ = loaded(path, family=family, verify=True, attn_implementation="eager")
    assert set(model.proof.refuted) == refuted, model.proof
    assert sum(finding.status == "holds" for finding in model.proof.findings) >= 4
    if refuted:
        with pytest.raises(Unavailable, match="logits_from_last_layer"):
            model.project_on_vocab(torch.zeros(1, 1, model.hidden_size))
