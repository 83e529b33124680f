"""One module per vision-language family; ``SERVED`` is the table the ``nnterp.families`` entry point names."""

HERE = "nnterp_vision.families."

SERVED = {
    "llava": HERE + "llava",
}
