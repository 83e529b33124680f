"""A family: everything nnterp knows about the model types it serves, as one frozen, typed object.

A family module defines one ``FAMILY``; a sibling is a diff of its nearest
relative::

    FAMILY = bert.FAMILY.replace(
        name="roberta",
        model_types=("roberta",),
        rename=bert.rename("roberta", "lm_head"),
        position_ids=position_ids,
    )

``StandardizedTransformer`` and the conformance kit read these fields and
nothing else of the module. A field the class does not declare is a
``TypeError`` where the family is written, never a setting silently ignored.
A leaf package that needs more (a vision wrapper's root scatter, the kernels a
recurrent mixer routes) subclasses ``Family`` with typed fields of its own and
overrides ``built``.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType, ModuleType
from typing import Any, Self, overload

from .tiny import TinyConfig

#: the modules every family names at the root
ROOT_NAMES = ("embed_tokens", "layers", "norm", "lm_head")


def _frozen(mapping: Mapping) -> Mapping:
    return mapping if isinstance(mapping, MappingProxyType) else MappingProxyType(dict(mapping))


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Family:
    """The model types a family serves, the names and components it gives them, and the few places its forward differs."""

    #: the family's short name, as reports and ``model.family.name`` spell it (``"bert"``)
    name: str
    #: the ``model_type`` values of the configs it serves
    model_types: tuple[str, ...] = ()
    #: the transformers model classes it serves beyond those of its model types, by class name
    #: (``"LlamaForCausalLM"``). The catalog indexes these and every class transformers' auto mappings give its
    #: model types (``scripts/catalogs.py``): a checkpoint whose ``model_type`` no family names is served by the
    #: family whose classes it is built of (a config-only type reusing Llama's, a hub checkpoint saying so)
    model_classes: tuple[str, ...] = ()
    #: native module paths (or module classes) to standard names, handed to nnsight's ``rename=``
    #: (``{"transformer.h": "layers"}``, ``{NemotronHMLP: "mlp"}``)
    rename: Mapping[Any, str] = dataclasses.field(default_factory=dict)
    #: which component wraps which module, keyed by standard-name path suffix (``"layers.*.mlp"``) or module
    #: class; handed to nnsight's ``envoys=``, the first matching key winning
    envoys: Mapping[Any, type] = dataclasses.field(default_factory=dict)
    #: the pipeline task its preprocessors load with: a wrapper's processor is ``"image-text-to-text"``
    task: str = "text-generation"
    #: keyword arguments it loads with unless the caller gives them (``{"dispatch": True}`` where timm modules
    #: read values while they are built and so cannot be built on the meta device)
    load_defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: its tiny checkpoints, by checkpoint name: what the conformance kit proves it on
    tiny: Mapping[str, TinyConfig] = dataclasses.field(default_factory=dict)
    #: for a wrapper (a vision-language model), the model type of the text family it reuses: that family's
    #: block names, components and hooks are merged in at load, through the registry, never imported
    text_family: str | None = None
    #: by tiny checkpoint, the kit's checks that skip there, each with a fragment of why (the values the family
    #: lacks, a mode it cannot run): ``{"gpt2": {"mid_stream": "parallel block"}}``. The kit holds its verdicts
    #: to it: a skip not declared here fails, and so does a declared one that passes or gives another reason
    skips: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    #: by tiny checkpoint, the kit's checks that fail on a bfloat16 load of it, each with why: what the model itself
    #: does otherwise in half precision (a top-k choosing another of two values its rounding ties). The report
    #: holds the half-precision profile to it: an undeclared failure, or a declared check that passes, is stale
    half_precision_failures: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    #: why the root has no ``norm`` (a post-LN model's last block normalizes the stream itself); None: it has one
    no_final_norm: str | None = None
    #: ``(config as a dict) -> Family | None``: the family serving this checkpoint where its names depend on the
    #: config (LLaVA on a Pixtral tower); None keeps this one
    for_config: Callable[[dict], Family | None] | None = None
    #: ``(model, inputs, kwargs) -> (inputs, kwargs)``: rewrites each invoke before it is batched
    #: (PaliGemma's text-only invokes go to the tokenizer, which its processor refuses)
    prepare_invoke: Callable[[Any, tuple, dict], tuple[tuple, dict]] | None = None
    #: ``(model, position_ids) -> position_ids``: where the model numbers tokens otherwise than nnsight's
    #: 0-based left-padding positions (RoBERTa from ``padding_idx + 1``)
    position_ids: Callable[[Any, Any], Any] | None = None
    #: ``(model, hidden) -> logits``: what the model does to its last ``layer_output``, where that is not
    #: ``lm_head(norm(hidden))`` (a logit scale or cap, a post-LN head); ``nnterp.logits.unembed`` else
    project_on_vocab: Callable[[Any, Any], Any] | None = None
    #: ``(model) -> None``, before a call that continues no cache: drops what the model kept of the last
    #: prompt (Qwen-VL's ``rope_deltas``)
    on_fresh_call: Callable[[Any], None] | None = None
    #: the engine whose modules the family names: ``"transformers"`` (``StandardizedTransformer``), or ``"vllm"``
    #: (``nnterp.vllm.StandardizedVLLM``: vLLM's own model classes, values flat over one request's tokens)
    engine: str = "transformers"
    #: how a load found this family where it was not by a model type the family lists (or ``family=``): ``"model
    #: class LlamaForCausalLM, which the default family serves ..."``, ``"inferred from the module tree ..."``. Set
    #: by ``StandardizedTransformer`` on the copy it serves, never by a family module; None: found by its own type
    resolution: str | None = None

    def __post_init__(self) -> None:
        for name in ("rename", "envoys", "load_defaults", "tiny"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        for field in ("skips", "half_precision_failures"):
            declared = getattr(self, field)
            object.__setattr__(
                self, field, _frozen({checkpoint: _frozen(checks) for checkpoint, checks in declared.items()})
            )
            strays = sorted(set(declared) - set(self.tiny))
            if strays:
                raise ValueError(
                    f"the {self.name} family declares {field} for {', '.join(strays)}, which are not among its tiny checkpoints"
                )
        object.__setattr__(self, "model_types", tuple(self.model_types))
        object.__setattr__(self, "model_classes", tuple(self.model_classes))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``: how a sibling is written as a diff of its nearest relative.

        A sibling serves its own model types with its own checkpoints, so a copy
        keeps ``model_types``, ``model_classes``, ``tiny`` and ``skips`` only where ``changes``
        names them; an unknown field is a ``TypeError``.
        """
        unknown = sorted(set(changes) - {field.name for field in dataclasses.fields(self)})
        if unknown:
            raise TypeError(
                f"{type(self).__name__} has no field {', '.join(map(repr, unknown))}; its fields: {', '.join(field_names(type(self)))}"
            )
        return dataclasses.replace(self, **{**OWN_FIELDS, **changes})

    def __repr__(self) -> str:
        serves = ", ".join(self.model_types) or "no model type of its own"
        found = f"; {self.resolution}" if self.resolution else ""
        return f"{type(self).__name__}({self.name!r}: serves {serves}{found})"

    @property
    def inferred(self) -> bool:
        """Whether this family was read off a module tree at load rather than written (``nnterp.inference``)."""
        return (self.resolution or "").startswith("inferred")

    def found_by(self, resolution: str) -> Family:
        """This family, saying how a load found it (``resolution``); every other field as it is."""
        return dataclasses.replace(self, resolution=resolution)

    @property
    def root_names(self) -> tuple[str, ...]:
        """The root modules this family names: all of ``ROOT_NAMES``, less ``norm`` where it says why there is none."""
        return tuple(name for name in ROOT_NAMES if not (name == "norm" and self.no_final_norm))

    def built(self, model: Any) -> None:
        """Called once the model's envoys exist (and again when nnsight rebuilds them): a subclass's load hook."""

    def with_text_family(self) -> Family:
        """This wrapper with its text family merged in; the family itself where it names none.

        The text family's block-level names (every entry of its ``rename`` but
        the root ones, whose places the wrapper names) and its components come
        after the wrapper's own; its hooks fill the ones the wrapper leaves unset.
        Merging twice changes nothing, and ``text_family`` still names it.
        Raises ``FamilyNotFound`` naming the package when the text family's is
        not installed.
        """
        if self.text_family is None:
            return self
        from .registry import family_for

        text = family_for(self.text_family).with_text_family()
        inner = {native: standard for native, standard in text.rename.items() if standard not in ROOT_NAMES}
        hooks = {name: getattr(text, name) for name in INHERITED_HOOKS if getattr(self, name) is None}
        return dataclasses.replace(
            self,
            rename={**inner, **self.rename},
            envoys={**self.envoys, **{key: value for key, value in text.envoys.items() if key not in self.envoys}},
            **hooks,
        )


#: what a copy does not inherit: a sibling serves its own model types, with its own checkpoints
OWN_FIELDS: dict[str, Any] = {
    "model_types": (),
    "model_classes": (),
    "tiny": {},
    "skips": {},
    "half_precision_failures": {},
    "resolution": None,
}

#: the hooks a wrapper takes from its text family where it sets none itself
INHERITED_HOOKS = ("no_final_norm", "position_ids", "project_on_vocab")


def field_names(cls: type[Family] = Family) -> tuple[str, ...]:
    """The fields a family of class ``cls`` may set."""
    return tuple(field.name for field in dataclasses.fields(cls))


def family_of_module(module: Any) -> Family:
    """The ``FAMILY`` a family module defines; a ``TypeError`` naming the module where it defines none."""
    family = vars(module).get("FAMILY")
    if not isinstance(family, Family):
        raise TypeError(f"{module.__name__} defines no FAMILY (an nnterp.Family); a family module defines exactly one")
    return family


@overload
def as_family(family: None) -> None: ...
@overload
def as_family(family: Family | ModuleType | str) -> Family: ...
def as_family(family: Family | ModuleType | str | None) -> Family | None:
    """A ``family=`` argument as a Family: one given, a family module's ``FAMILY``, or that of a module named by its path."""
    if isinstance(family, str):
        family = importlib.import_module(family)
    if isinstance(family, ModuleType):
        family = family_of_module(family)
    if family is not None and not isinstance(family, Family):
        raise TypeError(
            f"family= takes an nnterp Family (or a family module, or its dotted path), not {type(family).__name__}"
        )
    return family
