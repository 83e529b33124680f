"""nnterp_vision."""
