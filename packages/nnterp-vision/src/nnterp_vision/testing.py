"""Vision components pointed at the wrong tensor on purpose: what a family's tests use to show a kit check fails.

Key one on a tower's module type with ``nnterp_conformance.variants.with_envoys``
and the check the break is about must fail, naming the block.
"""

from .components import VisionAttention
from .components.qwen import QwenVisionAttention


class WrongContribution(VisionAttention):
    """The attention's contribution read at its query projection: the right shape, the wrong tensor."""

    attention_output = VisionAttention.attention_output.at("q_proj.output")


class PatternAtScores(VisionAttention):
    """The pattern read at the scores entering the softmax."""

    attention_probabilities = VisionAttention.attention_probabilities.at(
        "source.attention_interface_1.source.nn_functional_softmax_0.input"
    )


class QwenWrongContribution(QwenVisionAttention):
    """The Qwen ViT attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("proj.input")


def features_returned(tower: type) -> type:
    """``tower`` with ``image_features`` read at the copy the inner model returns after the text model ran: equal, and causally inert.

    Reading passes; writing moves nothing, which ``written_image_values_move_downstream`` must catch.
    """
    moved = tower.image_features.at("/model.output", select="image_hidden_states")
    return type(f"{tower.__name__}FeaturesReturned", (tower,), {"image_features": moved, "__doc__": features_returned.__doc__})
