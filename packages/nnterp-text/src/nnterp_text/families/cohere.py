"""Cohere, Cohere2, Cohere2-MoE, Compass: the default names on a one-norm parallel block; logits times ``logit_scale``."""

from nnterp import ParallelLayer, TinyConfig
from nnterp.families import default
from nnterp.logits import times_logit_scale

#: Cohere's logit scale away from its defaults, so a missing project_on_vocab cannot pass
COHERE_SCALE = {"logit_scale": 0.3}

FAMILY = default.FAMILY.replace(
    name="cohere",
    model_types=("cohere", "cohere2", "cohere_compass_text"),
    envoys={**default.FAMILY.envoys, "layers.*": ParallelLayer},
    project_on_vocab=times_logit_scale,
    tiny={
        "cohere": TinyConfig("cohere", {"num_hidden_layers": 3, "use_qk_norm": True, **COHERE_SCALE}),
        "cohere2": TinyConfig("cohere2", {"num_hidden_layers": 3, "sliding_window": 4, **COHERE_SCALE}),
        # the class default rope_parameters={} crashes: rope for the sliding layers, none (NoPE) for the full ones
        "cohere_compass_text": TinyConfig(
            "cohere_compass_text",
            {
                "num_hidden_layers": 3,
                "sliding_window": 4,
                "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                    "full_attention": None,
                },
                **COHERE_SCALE,
            },
        ),
    },
    skips={
        "cohere": {
            "mid_stream": "a parallel block",
        },
        "cohere2": {
            "mid_stream": "a parallel block",
        },
        "cohere_compass_text": {
            "mid_stream": "a parallel block",
        },
    },
)
