"""NDIF on a CPU-only machine: the two classes a local NDIF stack loads through its own import-path settings.

``scripts/ndif_stack.py`` puts this folder on the Ray node's ``PYTHONPATH`` and names the classes in NDIF's settings:

- ``NDIF_MODEL_IMPORT_PATH=nnterp_ndif_cpu.CPUModelActor``: the stock model actor pins a CUDA device, caps the
  process's CUDA memory and synchronizes CUDA around every request. This one loads the checkpoint on the CPU and does
  the rest exactly as the stock actor does (the same loader, ``requires_grad_(False)``, the same request path).
  Deleted when ndif's model actor takes the CPU as a device (upstream: a ``device="cpu"`` branch in
  ``BaseModelDeployment.load_from_disk`` and CUDA calls guarded by ``torch.cuda.is_available()``).
- ``NDIF_CONTROLLER_IMPORT_PATH=nnterp_ndif_cpu.Controller``: ndif 0.1.2 asks nnsight for
  ``describe_checkpoint(..., trust_remote_code=)`` and ``max_tp_size(..., trust_remote_code=)``, keywords nnsight 0.8.1
  does not take, so every deployment fails to be sized. This controller hands its evaluator a ``Remotable`` that drops
  the keyword. Deleted when nnsight releases the keyword (it is on nnsight's main branch) or ndif pins that release.

The Ray node is started with one declared GPU and a declared ``cuda_memory_bytes`` so the controller, which places
models on GPU nodes only, places the CPU actor; nothing ever touches CUDA.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray
from ndif.services.ray.deployments.controller import controller as _controller
from ndif.services.ray.deployments.controller.cluster import evaluator as _evaluator
from ndif.services.ray.deployments.modeling.base import BaseModelDeployment
from nnsight.modeling.huggingface import HuggingFaceModel
from nnsight.modeling.mixins.remotable import Remotable

logger = logging.getLogger("ndif.modeling")


class _CPUDeployment(BaseModelDeployment):
    """The stock model actor, its weights on the CPU: no CUDA device, no CUDA memory caps, no CUDA synchronization."""

    CACHEABLE = False  # parking moves weights GPU -> CPU; they are on the CPU already

    def load_from_disk(self) -> HuggingFaceModel:
        started = time.time()
        model = HuggingFaceModel.from_model_key(self.model_key, dispatch=True, dtype=self.dtype_name, device="cpu", **self.kwargs)
        model._module.requires_grad_(False)
        logger.info(f"Loaded {self.model_key} on the CPU in {time.time() - started:.1f} s")
        return model

    def cleanup(self) -> None:
        self.kill_switch.clear()
        self.kill_reason = None
        self.execution_ident = None
        self.model.interleaver.cancel()
        import gc

        gc.collect()


CPUModelActor = ray.remote(num_cpus=0, max_restarts=-1)(_CPUDeployment)


class _Remotable08(Remotable):
    """nnsight 0.8.1's ``Remotable`` taking (and, for a checkpoint that needs no remote code, ignoring) ``trust_remote_code``."""

    @classmethod
    def describe_checkpoint(cls, model_key: str, dtype: str, trust_remote_code: bool = False) -> Any:  # type: ignore[override]
        return Remotable.describe_checkpoint(model_key, dtype)

    @classmethod
    def max_tp_size(cls, model_key: str, trust_remote_code: bool = False) -> Any:  # type: ignore[override]
        return Remotable.max_tp_size(model_key)


class _Controller(_controller._ControllerActor):
    """ndif's controller, its evaluator asking nnsight 0.8.1 in the words 0.8.1 knows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # the evaluator reads ``Remotable`` from its module when it sizes a model; this process is the controller's own
        _evaluator.Remotable = _Remotable08
        super().__init__(*args, **kwargs)


Controller = ray.remote(num_cpus=0, num_gpus=0, max_restarts=-1, resources={"head": 1})(_Controller)
