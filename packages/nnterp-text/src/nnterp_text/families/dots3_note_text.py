"""dots3 (text): latent attention, its width differing by layer, each head gated before ``o_proj``: served as Laguna is."""

from nnterp_text.families.laguna import ENVOYS, RENAME  # noqa: F401 - the same diff of the default
