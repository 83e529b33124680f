"""nnsight's vLLM worker on the CPU, and the worker's envoy tree in nnterp's names.

nnsight 0.8.1 instruments only vLLM's GPU worker: its ``NNsightGPUWorker``
refuses any runner but ``GPUModelRunner`` ("Unsupported device type: cpu" on a
CPU build), and its runner builds a plain ``VLLM`` over the loaded module, so a
trace written against ``model.layers[3].layer_output`` finds neither the name
nor the value in the worker. The two classes here are nnsight's, with vLLM's
CPU runner in their bases and a runner that builds a ``StandardizedVLLM`` of
the family the client loaded (``additional_config["nnterp_family"]``).

Delete ``NNterpCPUWorker`` when nnsight ships a CPU worker, ``runner_class``'s
``load_model`` when its runner takes the model class from the engine config
(vLLM's GPU worker takes the same override, ``NNterpGPUWorker``). The patch
of vLLM's weight processing for the meta tree is ``nnterp._patches.vllm``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from nnsight.modeling.vllm.batching import VLLMBatcher
from nnsight.modeling.vllm.fragments import VLLMFragments
from nnsight.modeling.vllm.interleaver import VLLMInterleaver
from nnsight.modeling.vllm.model_runners.GPUModelRunner import NNsightGPUModelRunner, Requests
from nnsight.modeling.vllm.workers.GPUWorker import NNsightGPUWorker

from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

#: the engine-config key the client names its family under, for the worker's tree
FAMILY_KEY = "nnterp_family"


def standardized_tree(runner: Any) -> None:
    """Replace ``runner.load_model``'s plain ``VLLM`` tree with the family's ``StandardizedVLLM`` over the same module.

    What nnsight's ``NNsightGPUModelRunner.load_model`` does after vLLM's own
    load, with nnterp's class: the interleaver, the batcher over flat tokens,
    deferred errors, the persistent objects a request's ids resolve to.
    """
    from vllm.tokenizers import cached_tokenizer_from_config

    from . import StandardizedVLLM

    taps = runner.vllm_config.additional_config.get("nnsight_taps", ())
    family = runner.vllm_config.additional_config.get(FAMILY_KEY)
    model = StandardizedVLLM(
        runner.get_model(), family=family, interleaver=VLLMInterleaver(taps, fragments=VLLMFragments())
    )
    model.tokenizer = cached_tokenizer_from_config(runner.model_config)
    model.interleaver.batcher = VLLMBatcher(None)
    model.interleaver.defer_exceptions = True
    runner.nnsight_model = model
    runner.nnsight_requests = Requests()
    runner.nnsight_persistent_objects = model._remoteable_persistent_objects()


@cache
def runner_class(base: type[Any]) -> type:
    """nnsight's runner over ``base`` (vLLM's ``CPUModelRunner`` or ``GPUModelRunner``), building nnterp's tree."""

    def load_model(self: Any, *args: Any, **kwargs: Any) -> None:
        base.load_model(self, *args, **kwargs)
        standardized_tree(self)

    return type(
        f"Standardized{base.__name__}",
        (NNsightGPUModelRunner, base),
        {"load_model": load_model, "__module__": __name__},
    )


class NNterpGPUWorker(NNsightGPUWorker):
    """nnsight's GPU worker, whose runner builds nnterp's tree."""

    def init_device(self) -> None:
        super().init_device()
        self.model_runner.__class__ = runner_class(GPUModelRunner)


class NNterpCPUWorker(NNsightGPUWorker, CPUWorker):
    """nnsight's worker on vLLM's CPU worker, whose runner builds nnterp's tree."""

    def init_device(self) -> None:
        CPUWorker.init_device(self)
        runner = self.model_runner
        if type(runner) is not CPUModelRunner:
            raise NotImplementedError(
                f"nnterp instruments vLLM's CPUModelRunner, but this worker built {type(runner).__module__}."
                f"{type(runner).__name__} (the V2 runner?). Unset VLLM_USE_V2_MODEL_RUNNER to trace."
            )
        runner.__class__ = runner_class(CPUModelRunner)  # type: ignore[arg-type]  # mypy reads a class's __hash__ as unbound: no class is Hashable to it
