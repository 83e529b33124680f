"""Config fields the tiny checkpoints of several families share, on top of ``TinyConfig``'s shrunk sizes."""

#: latent attention: keys come per head from the latent, so as many key heads as query heads; qk 24, v 16
MLA = {"num_key_value_heads": 4, "qk_nope_head_dim": 16}
#: grouped routing over the tiny model's four experts
ROUTE = {"n_group": 1, "topk_group": 1}
#: grouped routing that bites: eight experts in four groups, two groups kept, two experts a token
GROUPED_ROUTE = {"n_routed_experts": 8, "n_group": 4, "topk_group": 2, "num_experts_per_tok": 2}
#: a dense first block and two mixtures, so both kinds of block are checked
SPARSE = {"mlp_layer_types": ["dense", "sparse", "sparse"]}
#: the sparse-attention indexer's sizes (index_topk stays at its default: a small one breaks ties differently under padding)
INDEXER = {"index_head_dim": 16, "index_n_heads": 2}
