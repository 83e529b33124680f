"""The tiny checkpoints of this package's families, by checkpoint name (the ``nnterp.checkpoints`` table).

Each is its model type's config shrunk by ``TinyConfig`` (a width of 64, two
layers, four heads, a vocabulary of 320 ...), with the fields a family needs on
top: a multiplier set away from one, a variant's switch.
"""

from nnterp import TinyConfig

from .families import DEFAULT_LAYOUT

#: the sandwich and post-norm blocks, whose class defaults already exercise their norms
SANDWICH_AND_POST_NORM = ("afmoe", "exaone4", "flex_olmo", "gemma3_text", "glm4", "kolibri1", "nanochat", "olmo2", "olmo3", "vaultgemma")

#: Granite's multipliers away from one, so a contribution read unscaled cannot pass
GRANITE_SCALES = {"residual_multiplier": 0.3, "logits_scaling": 2.5, "embedding_multiplier": 3.0, "attention_multiplier": 0.2}

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

#: Cohere's logit scale away from its defaults, so a missing project_on_vocab cannot pass
COHERE_SCALE = {"logit_scale": 0.3}

TINY_CONFIGS: dict[str, TinyConfig] = {
    **{model_type: TinyConfig(model_type) for model_type in DEFAULT_LAYOUT},
    **{model_type: TinyConfig(model_type) for model_type in SANDWICH_AND_POST_NORM},
    "bloom": TinyConfig("bloom", {"n_layer": 3}),
    "codegen": TinyConfig("codegen", {"n_layer": 3, "rotary_dim": 8}),
    "mpt": TinyConfig("mpt", {"n_layers": 3, "n_heads": 4, "max_seq_len": 256, "use_cache": True}),
    # rotary, multi-query, parallel (7B); ALiBi, sequential (RW); the new decoder architecture (40B)
    "falcon": TinyConfig("falcon", {"num_hidden_layers": 3}),
    "falcon-alibi": TinyConfig("falcon", {"num_hidden_layers": 3, "alibi": True, "multi_query": False, "parallel_attn": False, "bias": True}),
    "falcon-new-decoder": TinyConfig("falcon", {"num_hidden_layers": 3, "new_decoder_architecture": True, "num_kv_heads": 2}),
    "gemma2": TinyConfig("gemma2", {"final_logit_softcapping": 3.0, "attn_logit_softcapping": 5.0}),
    "gpt2": TinyConfig("gpt2", {"n_layer": 3}),
    # a global and a local layer, the window short enough to bite on a test prompt
    "gpt_neo": TinyConfig("gpt_neo", {"num_layers": 3, "num_heads": 4, "attention_types": [[["global", "local"], 1], [["global"], 1]], "window_size": 4}),
    "gpt_neox_japanese": TinyConfig("gpt_neox_japanese", {"num_hidden_layers": 3, "intermediate_multiple_size": 2}),
    "gptj": TinyConfig("gptj", {"n_layer": 3, "rotary_dim": 8}),
    "gpt_oss": TinyConfig("gpt_oss", {"sliding_window": 4}),
    "flint": TinyConfig("flint", {"sliding_window": 4, "mlp_only_layers": [0]}),
    "diffllama": TinyConfig("diffllama"),
    "granite_swa": TinyConfig("granite_swa", {**GRANITE_SCALES, "sliding_window": 4, "layer_rope_theta": [10000.0, 0]}),
    "granitemoe_swa": TinyConfig("granitemoe_swa", {**GRANITE_SCALES, "shared_intermediate_size": 32, "sliding_window": 4, "layer_rope_theta": [10000.0, 0]}),
    "granitemoeshared": TinyConfig("granitemoeshared", {**GRANITE_SCALES, "shared_intermediate_size": 32}),
    "doge": TinyConfig("doge", {"keep_window_size": 4}),
    "openai-gpt": TinyConfig("openai-gpt"),
    "gemma3n_text": TinyConfig("gemma3n_text", {"num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2, "num_kv_shared_layers": 2, "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 320, "laurel_rank": 8, "sliding_window": 4, "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0], "intermediate_size": 128}),
    **{
        model_type: TinyConfig(model_type, {"head_dim": 16, "global_head_dim": 32, "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 320, "sliding_window": 4, "final_logit_softcapping": 3.0})
        for model_type in ("gemma4_text", "gemma4_unified_text")
    },
    "emu3": TinyConfig("emu3"),
    "phi": TinyConfig("phi", {"num_hidden_layers": 3}),
    "cohere": TinyConfig("cohere", {"num_hidden_layers": 3, "use_qk_norm": True, **COHERE_SCALE}),
    "cohere2": TinyConfig("cohere2", {"num_hidden_layers": 3, "sliding_window": 4, **COHERE_SCALE}),
    "cohere2_moe": TinyConfig("cohere2_moe", {"num_hidden_layers": 3, "sliding_window": 4, "mlp_layer_types": ["dense", "sparse", "sparse"], "num_shared_experts": 1, **COHERE_SCALE}),
    # the sigmoid router, its shared expert summed rather than averaged
    "cohere2_moe-sigmoid": TinyConfig("cohere2_moe", {"num_hidden_layers": 3, "sliding_window": 4, "mlp_layer_types": ["dense", "sparse", "sparse"], "num_shared_experts": 1, **COHERE_SCALE, "expert_selection_fn": "sigmoid", "shared_expert_combination_strategy": "sum"}),
    # the class default rope_parameters={} crashes: rope for the sliding layers, none (NoPE) for the full ones
    "cohere_compass_text": TinyConfig("cohere_compass_text", {"num_hidden_layers": 3, "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"], "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}, "full_attention": None}, **COHERE_SCALE}),
    "gpt_neox": TinyConfig("gpt_neox", {"num_hidden_layers": 3}),
    "gpt_neox-sequential": TinyConfig("gpt_neox", {"num_hidden_layers": 3, "use_parallel_residual": False}),
    "persimmon": TinyConfig("persimmon", {"num_hidden_layers": 3}),
    "stablelm": TinyConfig("stablelm"),
    "stablelm-parallel": TinyConfig("stablelm", {"num_hidden_layers": 3, "use_parallel_residual": True}),
    "gpt_bigcode": TinyConfig("gpt_bigcode", {"n_layer": 3}),
    "gpt-sw3": TinyConfig("gpt-sw3", {"n_layer": 3}),
    "opt": TinyConfig("opt", {"num_hidden_layers": 3}),
    "opt-projected": TinyConfig("opt", {"num_hidden_layers": 3, "word_embed_proj_dim": 32}),
    "biogpt": TinyConfig("biogpt", {"num_hidden_layers": 3}),
    "modernbert-decoder": TinyConfig("modernbert-decoder", {"num_hidden_layers": 3, "local_attention": 8, "cls_token_id": 0, "sep_token_id": 0}),
    "ctrl": TinyConfig("ctrl", {"n_layer": 3, "dff": 128}),
    # is_decoder makes these encoders' attention causal, as a causal LM's
    **{model_type: TinyConfig(model_type, {"is_decoder": True}) for model_type in ("bert", "bert-generation", "camembert", "data2vec-text", "electra", "ernie", "roberta", "roc_bert", "xlm-roberta")},
    # the adapter used when no lang_ids are passed
    "xmod": TinyConfig("xmod", {"is_decoder": True, "default_language": "en_XX"}),
    # eps 1e-5, not the class default 1e-12: with that the final LayerNorm undoes a scaled last-block output
    # exactly in float32, so an edit there would reach nothing
    "roberta-prelayernorm": TinyConfig("roberta-prelayernorm", {"is_decoder": True, "layer_norm_eps": 1e-5}),
    "megatron-bert": TinyConfig("megatron-bert", {"is_decoder": True, "layer_norm_eps": 1e-5}),
    "xlm-roberta-xl": TinyConfig("xlm-roberta-xl", {"is_decoder": True}),
    # embedding widths away from the hidden width, so the projections after the embeddings run
    "roformer": TinyConfig("roformer", {"is_decoder": True, "embedding_size": 32}),
    "rembert": TinyConfig("rembert", {"is_decoder": True, "input_embedding_size": 32, "output_embedding_size": 48}),
    # full attention: the block-sparse default builds its pattern in pieces (its values say so when loaded that way)
    "big_bird": TinyConfig("big_bird", {"is_decoder": True, "attention_type": "original_full"}),
    "ministral": TinyConfig("ministral", {"num_hidden_layers": 3, "head_dim": 16}),
    "nemotron": TinyConfig("nemotron", {"num_hidden_layers": 3, "head_dim": 16, "num_key_value_heads": 2}),
    "hunyuan_v1_dense": TinyConfig("hunyuan_v1_dense", {"num_hidden_layers": 3, "head_dim": 16}),
    "hunyuan_v1_moe": TinyConfig("hunyuan_v1_moe", {"num_hidden_layers": 3, "head_dim": 16, "num_experts": 4, "moe_topk": 2}),
    "bitnet": TinyConfig("bitnet", {"num_hidden_layers": 3}),
    # softcapped router logits and a routed sum the block scales (the plain tiny has both off)
    "laguna-scaled": TinyConfig("laguna", {"num_hidden_layers": 3, **SPARSE, "layer_types": ["full_attention", "sliding_attention", "full_attention"], "sliding_window": 4, "num_attention_heads_per_layer": [4, 8, 4], "moe_routed_scaling_factor": 2.5, "moe_router_logit_softcapping": 0.5}),
    "laguna": TinyConfig("laguna", {"num_hidden_layers": 3, **SPARSE, "layer_types": ["full_attention", "sliding_attention", "full_attention"], "sliding_window": 4, "num_attention_heads_per_layer": [4, 8, 4]}),
    "deepseek_v2": TinyConfig("deepseek_v2", {**MLA, **ROUTE, "num_hidden_layers": 3, "first_k_dense_replace": 1, "num_experts_per_tok": 2}),
    "mixtral": TinyConfig("mixtral"),
    # Beam's default n_group=8 cannot split the shrunk experts
    "beam": TinyConfig("beam", {"num_experts": 8, "n_group": 4, "topk_group": 2, "sliding_window": 4}),
    "git": TinyConfig("git"),
    # RoPE is sized by head_dim, which must equal qk_rope_head_dim; the aliased sizes are not shrunk by name
    "longcat_flash": TinyConfig("longcat_flash", {"zero_expert_num": 2, "head_dim": 8, "num_key_value_heads": 4, "moe_topk": 2, "ffn_hidden_size": 128, "expert_ffn_hidden_size": 32}),
    **{model_type: TinyConfig(model_type) for model_type in ("jetmoe", "llama4_text")},
    **{
        model_type: TinyConfig(model_type)
        for model_type in ("qwen3_moe", "mellum", "qwen2_moe", "ernie4_5_moe", "minimax_m2", "minimax_m3_vl_text", "aria_text", "phimoe")
    },
    # Llama 4 with a dense first block and two mixtures
    "llama4_text-dense": TinyConfig("llama4_text", {"num_hidden_layers": 3, "moe_layers": [1, 2]}),
    # Granite-MoE-Shared without its shared MLP
    "granitemoeshared-noshared": TinyConfig("granitemoeshared", {**GRANITE_SCALES, "shared_intermediate_size": 0}),
    # DBRX with an L2 norm of the top-k weights instead of L1
    "dbrx-l2": TinyConfig("dbrx", {"n_layers": 3, "n_heads": 4, "max_seq_len": 256, "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0}, "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2, "moe_normalize_expert_weights": 2.0}}),
    # Gemma-4 with its mixture switched on
    "gemma4_text-moe": TinyConfig("gemma4_text", {"head_dim": 16, "global_head_dim": 32, "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 320, "sliding_window": 4, "final_logit_softcapping": 3.0, "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32}),
    **{model_type: TinyConfig(model_type) for model_type in ("dots1", "glm4_moe", "exaone_moe", "solar_open", "hy_v3")},
    "olmoe": TinyConfig("olmoe"),
    "deepseek_v3": TinyConfig("deepseek_v3", {**MLA, **ROUTE, "num_hidden_layers": 3, "first_k_dense_replace": 1}),
    # grouped routing: eight experts in four groups, the best two groups kept, two experts chosen
    # group_limited_greedy: the best single score picks the groups; scaled
    "deepseek_v2-grouped": TinyConfig("deepseek_v2", {**MLA, **GROUPED_ROUTE, "topk_method": "group_limited_greedy", "routed_scaling_factor": 2.5, "num_hidden_layers": 3, "first_k_dense_replace": 1}),
    "axk2-grouped": TinyConfig("axk2", {**MLA, **GROUPED_ROUTE, **SPARSE, **INDEXER, "num_hidden_layers": 3}),
    "deepseek_v3-grouped": TinyConfig("deepseek_v3", {**MLA, **GROUPED_ROUTE, "num_hidden_layers": 3, "first_k_dense_replace": 1}),
    "deepseek_v32": TinyConfig("deepseek_v32", {**MLA, **ROUTE, **SPARSE, **INDEXER, "num_hidden_layers": 3}),
    "glm4_moe_lite": TinyConfig("glm4_moe_lite", {**MLA, **SPARSE, "num_hidden_layers": 3}),
    # every indexer full: skipping a full one leaves a shared one after it without indices, and the model errors
    "glm_moe_dsa": TinyConfig("glm_moe_dsa", {**MLA, **SPARSE, **INDEXER, "num_hidden_layers": 3, "indexer_types": ["full", "full", "full"]}),
    "youtu": TinyConfig("youtu", {**MLA, "num_hidden_layers": 3}),
    "minicpm3": TinyConfig("minicpm3", {**MLA, "num_hidden_layers": 3}),
    "axk1": TinyConfig("axk1", {**MLA, **ROUTE, **SPARSE, "num_hidden_layers": 3}),
    "axk2": TinyConfig("axk2", {**MLA, **ROUTE, **SPARSE, **INDEXER, "num_hidden_layers": 3}),
    "mimo_v2_flash": TinyConfig("mimo_v2_flash", {"num_hidden_layers": 3, "head_dim": 24, "v_head_dim": 16, "sliding_window": 4, **SPARSE, "layer_types": ["full_attention", "sliding_attention", "full_attention"]}),
    "zaya": TinyConfig("zaya", {"num_hidden_layers": 3, "num_experts_per_tok": 1, "router_hidden_size": 32}),
    "dbrx": TinyConfig("dbrx", {"n_layers": 3, "n_heads": 4, "max_seq_len": 256, "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0}, "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}}),
    # per-layer sizes: the third block is a sliding layer with two heads and values 8 wide
    "dots3_note_text": TinyConfig("dots3_note_text", {
        "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
        "shared_experts_intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 4, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "kv_lora_rank": 32, "q_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
        "head_dim": 24, "index_head_dim": 16, "index_n_heads": 2, "max_position_embeddings": 256,
        "mlp_layer_types": ["dense", "sparse", "sparse"], "sliding_window": 4,
        "swa_num_attention_heads": 2, "swa_num_key_value_heads": 2, "swa_q_lora_rank": 16, "swa_kv_lora_rank": 16,
        "swa_head_dim": 24, "swa_qk_nope_head_dim": 16, "swa_v_head_dim": 8,
        "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}, shrink=False),
    "xglm": TinyConfig("xglm", {"num_layers": 3, "attention_heads": 4}),
    "hyperclovax": TinyConfig("hyperclovax", {"residual_multiplier": 0.3, "logits_scaling": 2.5, "embedding_multiplier": 3.0}),
    "gpt2-reorder": TinyConfig("gpt2", {"n_layer": 3, "reorder_and_upcast_attn": True}),
    "granite": TinyConfig("granite", {"num_hidden_layers": 3, **GRANITE_SCALES}),
    "granitemoe": TinyConfig("granitemoe", GRANITE_SCALES),
}
