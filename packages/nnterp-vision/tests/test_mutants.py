"""The vision towers' mutants: the kit's standard mistakes on one checkpoint per kind of tower, and the image features
read off the path the image takes, each killed by the check it names. A survivor is a failing test, fixed by a
stronger check, never by deleting the mutant.
"""

from nnterp_conformance.mutants import Mutant, killed, moved, standard_mutants
from transformers.models.clip.modeling_clip import CLIPVisionModel
from transformers.models.siglip.modeling_siglip import SiglipVisionModel

from nnterp_vision.components import Vision
from nnterp_vision.components.siglip import SiglipVision
from nnterp_vision.testing import features_at, features_returned

#: a CLIP tower (LLaVA), a SigLIP tower (PaliGemma), Idefics3's and Pixtral's (one packed sequence of patches)
TOWER_CHECKPOINTS = ("llava", "paligemma", "idefics3", "llava_pixtral")


def _patches_without_write_back() -> type:
    dropped = Vision.patch_embeddings.at()
    dropped._postprocess = None
    return moved(Vision, "patch_embeddings without its write-back", called="PatchesWithoutWriteBack", patch_embeddings=dropped)


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
    return standard + family_mutants()


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
