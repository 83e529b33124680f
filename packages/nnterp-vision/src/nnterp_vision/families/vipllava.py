"""VipLLaVA: LLaVA's CLIP tower and Llama text model, its projector over several tower layers at once.

The tree is LLaVA's (``model.vision``, ``model.projector``, the text model's
standard names). ``VipLlavaModel`` takes the tower's hidden states at each of
the config's ``vision_feature_layer`` indices, drops the class row from each
and concatenates them along the width, so ``projector.projector_input`` is
``[images, patches, len(vision_feature_layer) * vision_hidden_size]``; the
projector normalizes it (``projector_layernorm``) before its two linear
layers. The projection reaches the tokens unchanged through the same
``inputs_embeds.masked_scatter``, but unflattened: the scatter receives
``[images, patches, hidden_size]``, so ``VipLlavaVision.image_features`` serves
it one row per image token, as a view.
"""

from nnterp.descriptors import EProperty
from nnterp.families import default
from torch import Tensor
from transformers.models.clip.modeling_clip import CLIPAttention, CLIPEncoderLayer, CLIPMLP, CLIPVisionModel
from transformers.models.vipllava.modeling_vipllava import VipLlavaModel

from ..components import ImageScatter, Projector, Vision, VisionAttention, VisionLayer, VisionMlp, no_images
from ..layouts import ImageFeatures
from .llava import RENAME, TASK

__all__ = ["ENVOYS", "RENAME", "TASK", "VipLlavaVision"]

SCATTERED = Vision.image_features


class VipLlavaVision(Vision):
    """LLaVA's CLIP tower; the features VipLlavaModel scatters are per image, ``[images, patches, hidden_size]``."""

    @EProperty(SCATTERED.key, SCATTERED.description, no_images, SCATTERED.select)
    def image_features(self, value: Tensor) -> ImageFeatures:
        """The features scattered into the image tokens, ``[image_tokens, hidden_size]``, in token order.

        The scatter's ``[images, patches, hidden_size]`` argument viewed one
        row per image token, so in-place edits land;
        ``model.layers[0].layer_input[vision.image_token_mask] == image_features``.
        Assign a tensor of the same shape to replace what the text model receives.
        """
        return value.flatten(0, 1)

    @image_features.postprocess
    def image_features(self, value: Tensor) -> Tensor:
        # every image is one crop of image_size, its class row dropped
        return value.unflatten(0, (-1, (self.image_size // self.patch_size) ** 2))


#: LLaVA's, with VipLlavaModel as the scatter
ENVOYS = {
    CLIPVisionModel: VipLlavaVision,
    CLIPEncoderLayer: VisionLayer,
    CLIPAttention: VisionAttention,
    CLIPMLP: VisionMlp,
    "projector": Projector,
    VipLlavaModel: ImageScatter,
    **default.ENVOYS,
}
