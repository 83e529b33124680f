"""Where the image features enter the text model: the wrapper's scatter into the token embeddings."""

from __future__ import annotations

from typing import Any, ClassVar

from nnterp.components import Standard


class ImageScatter(Standard):
    """The wrapper's inner model, whose forward scatters the image features into the token embeddings.

    A family keys it on that module's type (``LlavaModel: ImageScatter``).
    ``Vision.image_features`` reads argument ``scatter_argument`` of operation
    ``scatter_operation`` of this forward: on LLaVA the features in
    ``inputs_embeds.masked_scatter(special_image_mask, image_features)``, which
    is what the text model receives at the image tokens, whatever the wrapper
    did after its projector. The tower runs inside this same forward, before
    the scatter, so the forward is instrumented at build (``sourced``): a read
    of the scatter after a tower value finds it hooked. Carries no values of
    its own.
    """

    sourced: ClassVar[bool] = True
    #: the operation that writes the features into the embeddings, as ``.source`` names it
    scatter_operation: ClassVar[str] = "inputs_embeds_masked_scatter_0"
    #: which of its arguments the features are
    scatter_argument: ClassVar[int | str] = 1


def scatter_host(envoy: Any) -> ImageScatter:
    """The ``ImageScatter`` of the model ``envoy`` belongs to: the root's first child that is one."""
    root = envoy.root
    for child in root._children:
        if isinstance(child, ImageScatter):
            return child
    raise LookupError(
        f"{type(root._module).__name__}: the family keys no module as ImageScatter, and declares no root_scatter"
    )


def scatter_site(envoy: Any) -> tuple[str, int | str]:
    """Where the model ``envoy`` belongs to writes its image features: the key of the operation's inputs, and which argument.

    A wrapper whose root forward scatters the features itself (Llama 4: no
    inner model) declares the operation as ``VisionFamily.root_scatter`` (its argument
    ``root_scatter_argument``, 1 by default), and core instruments the root's
    forward at build; any other wrapper keys its inner model as an ``ImageScatter``.
    """
    from ..family import VisionFamily

    root = envoy.root
    family = root.__dict__.get("family")
    if isinstance(family, VisionFamily) and family.root_scatter is not None:
        return f"/source.{family.root_scatter}.inputs", family.root_scatter_argument
    host = scatter_host(envoy)
    relative = host.path[len(root.path) :].lstrip(".")
    return f"/{relative}.source.{host.scatter_operation}.inputs", host.scatter_argument
