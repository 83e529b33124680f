"""One module per recurrent or hybrid family; ``SERVED`` is the table the ``nnterp.families`` entry point names."""

HERE = "nnterp_recurrent.families."

SERVED = {
    "qwen3_next": HERE + "qwen3_next",
    "qwen3_5_text": HERE + "qwen3_5_text",
    "qwen3_5_moe_text": HERE + "qwen3_5_moe_text",
    "olmo_hybrid": HERE + "olmo_hybrid",
    "kimi_linear": HERE + "kimi_linear",
    "bailing_hybrid": HERE + "bailing_hybrid",
    "mamba": HERE + "mamba",
    "falcon_mamba": HERE + "falcon_mamba",
    "jamba": HERE + "jamba",
    "mamba2": HERE + "mamba2",
    "bamba": HERE + "bamba",
    "granitemoehybrid": HERE + "granitemoehybrid",
    "nemotron_h": HERE + "nemotron_h",
    "falcon_h1": HERE + "falcon_h1",
    "zamba2": HERE + "zamba2",
}
