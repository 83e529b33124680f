"""nnterp's patch of vLLM: installed while nnsight builds a client's meta tree.

- ``META_TREE_UNPROCESSED``: vLLM's weight processing after loading does
  nothing (``nnterp.vllm.StandardizedVLLM`` installs it around nnsight's meta build).
"""

from __future__ import annotations

from typing import Any

from . import Patch


@Patch.of("vllm.model_executor.model_loader.base_loader:process_weights_after_loading")
def META_TREE_UNPROCESSED(process: Any) -> Any:
    """vLLM's ``process_weights_after_loading``, doing nothing while nnsight builds the client's meta tree.

    The tree is read for its structure only, and vLLM's CPU mixture prepacks
    its expert weights there (``_C::prepack_moe_weight``), which no meta tensor
    can run: a mixture of experts cannot be built otherwise. Delete it when
    nnsight's ``VLLM._load_meta`` skips vLLM's ``process_weights_after_loading``
    for the meta tree it builds.
    """
    return lambda *args, **kwargs: None
