"""AXK2: DeepSeek's latent attention with a sigmoid gate on the heads before ``o_proj``: served as Laguna is."""

from nnterp_text.families.laguna import ENVOYS, RENAME  # noqa: F401 - the same diff of the default
