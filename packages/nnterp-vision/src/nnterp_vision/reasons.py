"""Why an image value is unavailable: written once, used by every tower."""

NO_PROCESSOR = (
    "this load has no processor (a text-only task), so no image reaches the model and its vision tower never "
    "runs; load with task='image-text-to-text' and trace with images=[...]"
)
NO_IMAGE = "this trace passes no image (model.trace(prompt, images=[image])), so the vision tower does not run"
NO_PROJECTOR = "the family names no projector: where the image enters the text model is not mapped"
