"""One module per recurrent or hybrid family; ``SERVED`` is the table the ``nnterp.families`` entry point names."""

HERE = "nnterp_recurrent.families."

SERVED = {
    "qwen3_next": HERE + "qwen3_next",
    "qwen3_5_text": HERE + "qwen3_5_text",
    "qwen3_5_moe_text": HERE + "qwen3_5_moe_text",
    "olmo_hybrid": HERE + "olmo_hybrid",
}
