"""nnterp_recurrent."""
