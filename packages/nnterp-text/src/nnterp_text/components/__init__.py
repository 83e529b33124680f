"""The text components a family keys on its modules where nnterp's own do not fit: one module a component."""
