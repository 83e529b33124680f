"""Kolibri-1: GLM-4's post-sublayer norms around a mixture of experts (so no dense MLP to alias)."""

from nnterp.families.default import RENAME  # noqa: F401 - the default names

from .glm4 import ENVOYS  # noqa: F401 - GLM-4's block
