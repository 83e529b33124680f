"""nnterp's patches of transformers: each one installed where it is needed, for as long as it is needed.

- ``PARAMETER_PLAN``: ``_get_parameter_plan`` where nnsight 0.8.1 imports it
  from (held for the life of a sharded model, ``nnterp._tensor_parallel.bridge``).

A leaf package's patches of transformers are its own: ``nnterp_recurrent._patches``
(the kernel dispatchers of the recurrent modeling modules) and
``nnterp_vision._patches`` (Llama 4's text output).
"""

from __future__ import annotations

from typing import Any

from . import MISSING, Patch


@Patch.of("transformers.distributed.tensor_parallel:_get_parameter_plan")
def PARAMETER_PLAN(found: Any) -> Any:
    """transformers' ``_get_parameter_plan``, where nnsight 0.8.1's tensor parallelism imports it from.

    nnsight imports it from ``transformers.distributed.tensor_parallel``;
    5.23 keeps it in ``transformers.distributed.parallel_utils``: it is
    re-exported where nnsight looks (a release that has it there is left
    alone), and deleted again on uninstall. Held for the life of a sharded
    model. Delete it when ``nnsight.modeling.tp.fragments`` imports it from
    ``transformers.distributed.parallel_utils``.
    """
    if found is not MISSING:
        return found
    from transformers.distributed.parallel_utils import _get_parameter_plan

    return _get_parameter_plan
