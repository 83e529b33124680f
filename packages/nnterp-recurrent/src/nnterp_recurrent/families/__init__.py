"""One module per recurrent or hybrid family; ``SERVED`` is the table the ``nnterp.families`` entry point names."""

HERE = "nnterp_recurrent.families."

SERVED = {
    "qwen3_next": HERE + "qwen3_next",
}
