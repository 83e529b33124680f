"""A recurrent family: a ``Family`` that also names the transformers modules its mixers' kernels are bound in."""

from __future__ import annotations

import dataclasses

from nnterp.family import Family


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class RecurrentFamily(Family):
    """A family with recurrent mixers (gated DeltaNet, Mamba): ``route_kernels`` reads where their kernels live."""

    #: the transformers modeling modules whose kernel dispatchers its mixers call
    #: (``("transformers.models.qwen3_next.modeling_qwen3_next",)``): what ``route_kernels`` rebinds
    modeling: tuple[str, ...] = ()
