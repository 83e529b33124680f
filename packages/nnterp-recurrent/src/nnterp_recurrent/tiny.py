"""Mixer sizes several recurrent families' tiny checkpoints share: light, plain dicts of config fields."""

#: a gated DeltaNet small enough for a CPU: two key heads serving four value heads of width 8
DELTANET = {
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
}

#: Kimi delta attention beside latent attention, which keeps a key/value head per query head
KIMI_DELTA = {"linear_num_heads": 4, "linear_head_dim": 8, "num_key_value_heads": 4}

#: a Mamba-1 mixer
SELECTIVE_SCAN = {"intermediate_size": 128, "state_size": 8}

#: a Mamba-2 mixer: eight heads in two groups, a state of 8, chunks of 4 so a prompt spans several
SSD = {"mamba_n_heads": 8, "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_chunk_size": 4}
