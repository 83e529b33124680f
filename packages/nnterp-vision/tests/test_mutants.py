"""The vision towers' mutants: the kit's standard mistakes on one checkpoint per kind of tower, and the image features
read off the path the image takes, each killed by the check it names. A survivor is a failing test, fixed by a
stronger check, never by deleting the mutant.
"""

from nnterp import EProperty
from nnterp_conformance.mutants import Mutant, _detached, killed, moved, standard_mutants
from transformers.models.clip.modeling_clip import CLIPMLP, CLIPEncoderLayer, CLIPVisionModel
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLVisionBlock
from transformers.models.siglip.modeling_siglip import SiglipVisionModel

from nnterp_vision.components import Projector, Vision, VisionLayer, VisionMlp, no_images
from nnterp_vision.components.qwen import QwenVisionLayer
from nnterp_vision.components.siglip import SiglipVision
from vision_harness import features_at, features_returned

#: a CLIP tower (LLaVA), a SigLIP tower (PaliGemma), Idefics3's and Pixtral's (one packed sequence of patches)
TOWER_CHECKPOINTS = ("llava", "paligemma", "idefics3", "llava_pixtral")


def _patches_without_write_back() -> type:
    dropped = Vision.patch_embeddings.at()
    dropped._postprocess = None
    return moved(Vision, "patch_embeddings without its write-back", called="PatchesWithoutWriteBack", patch_embeddings=dropped)


def _patches_beside_the_graph() -> type:
    """LLaVA's tower with ``patch_embeddings`` served as the one-row-per-patch view and never handed back: the
    convolution's own map goes on, so edits land but no gradient reaches the view."""
    beside = Vision.patch_embeddings.at()
    beside._transform = None
    return moved(Vision, "patch_embeddings a view beside the graph", called="PatchesBesideTheGraph", patch_embeddings=beside)


def _packed_stream_beside_the_graph() -> type:
    """A Qwen ViT block whose stream values are the packed tensor viewed with a leading 1, never handed back."""
    values = {}
    for name in ("layer_input", "layer_mid", "layer_output"):
        values[name] = getattr(QwenVisionLayer, name).at()
        values[name]._transform = None
    return moved(QwenVisionLayer, "the packed stream a view beside the graph", called="PackedStreamBesideTheGraph", **values)


def _projector_one_block_late() -> type:
    """LLaVA's projector with ``projector_input`` read at the tower's last block, the class row dropped: one block late."""

    def projector_input(self, value):
        return value[:, 1:]

    late = EProperty(lambda envoy: f"/vision.layers.{envoy.root.vision.num_layers - 1}.output", "the last block's stream", no_images, select=0)
    return moved(Projector, "projector_input read at the tower's last block", called="ProjectorOneBlockLate", projector_input=late(projector_input))


def _projector_output_before_its_activation() -> type:
    """LLaVA's projector with ``projector_output`` read at ``linear_1``'s output: the width it returns, before GELU and ``linear_2``."""
    early = Projector.projector_output.at("linear_1.output")
    return moved(Projector, "projector_output read at the first linear layer", called="ProjectorOutputTooEarly", projector_output=early)


def block_mutants() -> list[Mutant]:
    """The CLIP tower's block values and the projector's input misread, each killed by the check of its identity."""
    return [
        Mutant("llava: tower neurons read before the activation", "llava",
               {CLIPMLP: moved(VisionMlp, "mlp_neurons at fc1's output", mlp_neurons=VisionMlp.mlp_neurons.at("up_proj.output"))},
               "vision_neurons_make_contribution", "mlp_activation against mlp_neurons",
               "mlp_neurons pointed at fc1's output, before the activation: the same width, the pre-activations"),
        Mutant("llava: tower layer_mid read at the block's input", "llava",
               {CLIPEncoderLayer: moved(VisionLayer, "layer_mid at the block's input", layer_mid="layer_input")},
               "vision_mid_stream", "against layer_mid",
               "layer_mid pointed at the block's input: the same layout, the stream before the attention adds to it"),
        Mutant("llava: projector input read one block late", "llava", {"projector": _projector_one_block_late()},
               "projector_reads_the_selected_stream", "against projector_input",
               "projector_input read at the tower's last block, where LLaVA takes hidden_states[-2] (vision_feature_layer=-2)"),
        Mutant("llava: projector output read before its activation", "llava", {"projector": _projector_output_before_its_activation()},
               "projector_maps_its_input", "projector called on projector_input against projector_output",
               "projector_output read at linear_1's output, before the GELU and linear_2: the text width either way, the input still right"),
        Mutant("llava: tower mlp_norm_output read at the attention's norm", "llava",
               {CLIPEncoderLayer: moved(VisionLayer, "mlp_norm_output at layer_norm1's output", mlp_norm_output="attention_norm_output")},
               "vision_norm_outputs_feed_the_sublayers", "mlp_norm_output against what mlp is called with",
               "mlp_norm_output pointed at layer_norm1 (CLIP's two norms, the first taken for the second): the same layout, the attention's input"),
        Mutant("llava: tower neurons served detached", "llava",
               {CLIPMLP: moved(VisionMlp, "tower neurons off the graph", mlp_neurons=_detached(VisionMlp.mlp_neurons))},
               "tower_gradients_are_derivatives", "vision.layers[0].mlp.mlp_neurons is not on the path",
               "mlp_neurons served as value.detach(): the same numbers and storage, so the tower's sums and edits hold, but no gradient reaches it"),
        Mutant("llava: patch embeddings a view beside the graph", "llava", {CLIPVisionModel: _patches_beside_the_graph()},
               "tower_gradients_are_derivatives", "vision.patch_embeddings is not on the path",
               "patch_embeddings served one row per patch as a new view of the convolution's map, which the tower goes on from instead"),
        Mutant("qwen2_vl: packed stream a view beside the graph", "qwen2_vl", {Qwen2VLVisionBlock: _packed_stream_beside_the_graph()},
               "tower_gradients_are_derivatives", "vision.layers[0].layer_input is not on the path",
               "the packed [patches, width] stream served viewed [1, patches, width], the block going on from its own tensor"),
    ]


def family_mutants() -> list[Mutant]:
    """The image's path misread: the features before the projector's activation, or where nothing downstream reads them."""
    before = "the projector's first linear layer, before its activation and second layer"
    return [
        Mutant("llava: image features before the projector's activation", "llava",
               {CLIPVisionModel: features_at(Vision, "/projector.linear_1.output", before)},
               "image_features_reach_the_text", "against image_features: off by", f"image_features read at {before}"),
        Mutant("llava: image features read where the model returns them", "llava", {CLIPVisionModel: features_returned(Vision)},
               "written_image_values_move_downstream", "left the logits unchanged",
               "image_features read at the copy the model returns after the text model ran: equal, and a write moves nothing"),
        Mutant("llava: patch embeddings written back in the served layout", "llava", {CLIPVisionModel: _patches_without_write_back()},
               "tower_values_assigned_back_change_nothing", "vision.patch_embeddings, assigned what it reads",
               "patch_embeddings served one row per patch, but an assignment swapped in as it is, not laid back out as the convolution's map"),
        Mutant("paligemma: image features read where the model returns them", "paligemma", {SiglipVisionModel: features_returned(SiglipVision)},
               "written_image_values_move_downstream", "left the logits unchanged",
               "image_features read at the copy the model returns after the text model ran: equal, and a write moves nothing"),
    ]


def catalogue() -> list[Mutant]:
    """This package's mutants: the standard ones on each of ``TOWER_CHECKPOINTS``' towers, then the image path's."""
    standard = [mutant for checkpoint in TOWER_CHECKPOINTS for mutant in standard_mutants(checkpoint) if mutant.check.startswith("vision_")]
    return standard + family_mutants() + block_mutants()


def pytest_generate_tests(metafunc):
    if "mutant" in metafunc.fixturenames:
        mutants = catalogue()
        metafunc.parametrize("mutant", mutants, ids=[mutant.name for mutant in mutants])


def test_every_tower_gets_the_standard_mistakes():
    # each tower is offered its attention's four mistakes: a tower that lost one would hide a survivor
    names = {mutant.name for mutant in catalogue()}
    for checkpoint in TOWER_CHECKPOINTS:
        assert f"{checkpoint}: tower queries and keys swapped" in names


def test_every_mutant_is_killed_by_its_check(mutant):
    found = killed(mutant)
    assert found.status == "fail" and mutant.message in found.detail, f"{mutant.name} survives {mutant.check} ({mutant.reason}): {found}"
