"""Ovis2.5: the packed SigLIP-named tower in windows, a projector embedding a distribution over visual words, and
the image's start and end tokens written from the same table.

The projector takes the last block's output as the blocks hold it (window
order, before the tower's final norm), so ``tower_output`` is read by nothing
downstream; a projector said to take ``tower_output`` (as most wrappers' do)
is caught by ``projector_reads_the_selected_stream``.
"""

import torch
from nnterp_vision.components.paddleocr_vl import PaddleOcrVision
from nnterp_vision.components.projector import Selected
from vision_harness import OutProjWrongContribution, VisionFamilyTests, read
from transformers.models.ovis2_5.modeling_ovis2_5 import Ovis2_5MultiModalProjector, Ovis2_5VisionAttention

from nnterp_vision.families.ovis2_5 import UNREAD, VisualTokenizer

PROMPT = "<ovis_image_atom>Hello world"
#: the checks' 40 x 48 image resized to 32 x 48: 4 x 6 patches, merged 2 x 2 into 6 image tokens
PATCHES, TOKENS = 24, 6


class TakesTheTowerOutput(VisualTokenizer):
    """The projector said to take the tower's last_hidden_state, after its final norm, as a LLaVA-style wrapper would."""

    def selection(self):
        return (Selected("tower_output"),)


def test_tree_and_sizes(model):
    vision = model.vision
    assert isinstance(vision, PaddleOcrVision) and vision is model.model.vision_tower and model.projector is model.model.multi_modal_projector
    assert isinstance(model.projector, VisualTokenizer)
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.patch_size, vision.window_size) == (2, 64, 4, 8, 32)
    assert model.projector.projector_input_size == 64
    assert vision.support()["tower_output"] is None  # it reads; only its gradient and its writes are refused
    assert type(vision).tower_output.off_the_graph == UNREAD


def test_the_projector_takes_the_last_block_and_its_rows_reach_the_image_tokens(model):
    mask, patches, last, tower, taken, projected, features, stream = read(
        model, PROMPT, "vision.image_token_mask", "vision.patch_embeddings", "vision.layers.-1.layer_output",
        "vision.tower_output", "projector.projector_input", "projector.projector_output", "vision.image_features",
        "layers.0.layer_input",
    )
    assert int(mask.sum()) == TOKENS and patches.shape == last.shape == (1, PATCHES, 64)
    torch.testing.assert_close(taken, last[0], rtol=0, atol=0)
    assert projected.shape == features.shape == (TOKENS, 64) and torch.equal(projected, features)
    torch.testing.assert_close(stream[mask], features, rtol=0, atol=0)
    # the tower returns its final norm over the last block's rows put back in merge-block order; the projector takes
    # neither the norm nor that order
    with torch.no_grad():
        normed = model.model.vision_tower.post_layernorm(last)[0]
    order = torch.cdist(tower[0], normed).argmin(-1)
    torch.testing.assert_close(tower[0], normed[order])
    assert sorted(order.tolist()) == list(range(PATCHES)) and order.tolist() != list(range(PATCHES))
    # the start and end tokens get the embedding table's first two indicator rows
    table = model.model.multi_modal_projector.visual_embeddings_table.weight.T
    words = model._module.config.vision_config.vocab_size - model._module.config.vision_config.num_visual_indicator_tokens
    positions = mask[0].nonzero().flatten()
    start, end = int(positions[0]) - 1, int(positions[-1]) + 1
    assert torch.equal(stream[0, start], table[words]) and torch.equal(stream[0, end], table[words + 1])


class TestOvis2_5(VisionFamilyTests):
    checkpoint = "ovis2_5"
    breaks = (
        ("vision_contribution", {Ovis2_5VisionAttention: OutProjWrongContribution}, "against layer_output: off by"),
        ("projector_reads_the_selected_stream", {Ovis2_5MultiModalProjector: TakesTheTowerOutput}, "against projector_input: off by"),
    )
