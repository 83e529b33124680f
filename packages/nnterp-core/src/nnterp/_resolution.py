"""Which family serves a checkpoint: by its model type, else by its classes, else inferred from its module tree.

A family found by a model type it lists is returned as it is; one found
otherwise is a copy saying how (``Family.resolution``). A type an
uninstalled nnterp package serves is an error naming the package before any
class is looked at or anything inferred: installing it is the fix. A type
``nnterp.reach`` keeps out of reach, and no family serves by its classes, is
refused with its reason before anything is inferred.
"""

from __future__ import annotations

from typing import Any

import torch

from . import reach, registry
from .errors import FamilyNotFound
from .family import Family


def config_dict(model: Any, kwargs: dict) -> dict:
    """The checkpoint's config as a plain dict (nested configs as dicts too)."""
    # Any: nn.Module types its attributes Tensor | Module, and a transformers model's config is a PretrainedConfig
    config: Any = model.config if isinstance(model, torch.nn.Module) else kwargs.get("config")
    if config is not None:
        return config.to_dict()
    # The raw dict, not AutoConfig: a family outside transformers registers its
    # config class when its family module is imported, which is after this.
    from transformers import PretrainedConfig

    return PretrainedConfig.get_config_dict(model, **_hub(kwargs))[0]


def resolve(model: Any, kwargs: dict) -> Family:
    """The family serving ``model`` (a hub id, a directory or a module), saying how it was found."""
    config = config_dict(model, kwargs)
    model_type = config["model_type"]
    name = registry._entry("model_types", model_type)
    if name is not None:
        return registry.family_named(name)
    registry.missing_package(model_type)
    classes = _classes(model, config, model_type)
    served = registry.family_of_classes(classes)
    if served is not None:
        family, klass = served
        return family.found_by(
            f"model class {klass}, which the {family.name} family serves (no family names model type {model_type!r})"
        )
    # a type kept out of reach is refused with its reason, not inferred into values a proof would withdraw
    reach.refuse(model_type)
    from .inference import infer

    try:
        tree = module_tree(model, kwargs)
    except Exception as error:
        raise FamilyNotFound(
            f"no nnterp family exists yet for model type {model_type!r}, none serves its classes ({', '.join(classes) or 'none named'}), "
            f"and transformers cannot build it to infer one ({type(error).__name__}: {str(error).splitlines()[0]}); write a family "
            f"(docs/adding-a-family.md) and register it under the {registry.FAMILIES!r} entry-point group, "
            "or pass family= (an nnterp Family) to StandardizedTransformer"
        ) from error
    return infer(tree, model_type)


def _classes(model: Any, config: dict, model_type: str) -> list[str]:
    """The class names ``model`` is built of: a module's own (and its bases'), the config's ``architectures``, and
    the classes transformers builds ``model_type`` with."""
    found = [klass.__name__ for klass in type(model).__mro__] if isinstance(model, torch.nn.Module) else []
    found += list(config.get("architectures") or [])
    found += list(registry.mapped_classes(model_type))
    return list(dict.fromkeys(found))


def module_tree(model: Any, kwargs: dict) -> torch.nn.Module:
    """``model``'s modules, to read its structure off: the module itself, or one built from its config on the meta device."""
    if isinstance(model, torch.nn.Module):
        return model
    from transformers import AutoConfig, AutoModelForCausalLM

    trust = {"trust_remote_code": kwargs["trust_remote_code"]} if "trust_remote_code" in kwargs else {}
    config = kwargs.get("config") or AutoConfig.from_pretrained(model, **_hub(kwargs), **trust)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, **trust)


def _hub(kwargs: dict) -> dict:
    return {key: kwargs[key] for key in ("revision", "token") if key in kwargs}
