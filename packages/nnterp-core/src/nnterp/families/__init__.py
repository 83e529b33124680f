"""The family core ships: the default pre-norm block on the shared attention interface."""
