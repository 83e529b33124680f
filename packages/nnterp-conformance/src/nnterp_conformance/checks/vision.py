"""A vision tower: its blocks' identities, and the image reaching the text model where the family says it does.

Each check traces its own image (``image()``, from a fixed seed) with the
case's first prompt behind the processor's image token, so the tower runs.
"""

from __future__ import annotations

import operator
from dataclasses import replace
from typing import Any

from nnterp.identities import CONTRIBUTION, PATTERN_IS_SOFTMAX_OF_SCORES, softmax_pattern, stream_sum
from nnterp.protocols import VisionModel
from nnterp.tolerances import coarsest

import torch

from .base import Case, CheckFailure, Gaps, Skip, check, expect_close, expect_holds, get

#: the seed of the checks' image and its size (height, width): not square, so the processor resizes and crops
IMAGE_SEED = 0
IMAGE_SHAPE = (40, 48)
#: the text after the image token when a case's prompt is token ids
FALLBACK_TEXT = "Hello world"


def has_vision(model: VisionModel) -> bool:
    """Whether the model serves a vision tower (``model.vision``)."""
    return "vision" in model.__dict__


#: the sides a drawn image's height and width range over, in pixels
SIDES = (24, 64)


def image(seed: int = IMAGE_SEED) -> Any:
    """A PIL image of uniform noise from ``seed``: the same pixels every run, nothing downloaded.

    The checks' own seed gives ``IMAGE_SHAPE``; any other seed (a drawn case's)
    also draws the height and width within ``SIDES``, so the processors'
    resizing, tiling and packing meet images of many shapes.
    """
    import numpy as np
    from PIL import Image

    generator = np.random.default_rng(seed)
    shape = (
        IMAGE_SHAPE
        if seed == IMAGE_SEED
        else tuple(int(side) for side in generator.integers(SIDES[0], SIDES[1] + 1, 2))
    )
    pixels = generator.integers(0, 256, (*shape, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def image_token(model: VisionModel, case: Case) -> str:
    """The image token a prompt holds, as the processor expands it; ``Skip`` when the load has no processor to take an image."""
    reason = model.vision.support().get("image_features")
    if reason is not None:
        raise Skip(f"no image reaches the model: {reason}")
    # the token a prompt holds: Qianfan-OCR's processor expands "<image>" (its placeholder) into its image_token
    processor = model.processor
    return getattr(processor, "image_placeholder_token", None) or getattr(processor, "image_token", None) or "<image>"


#: the most images a drawn prompt holds
MOST_IMAGES = 2


def image_batch(model: VisionModel, case: Case) -> tuple[list[str], list[list[Any]]]:
    """The case's image batch: prompts, and one list of images per prompt (``trace(prompts, images=images)``).

    The checks' own seed gives one prompt with one image (``IMAGE_SHAPE``); a
    drawn case's seed also draws how many images its prompt holds (one to
    ``MOST_IMAGES``, each with a size of its own) and whether a second prompt
    with no image rides in the same batch, so the scatter meets several
    images per prompt and rows without any.
    """
    import numpy as np

    token = image_token(model, case)
    text = case.prompts[0] if isinstance(case.prompts[0], str) else FALLBACK_TEXT
    if case.seed == IMAGE_SEED:
        return [f"{token}{text}"], [[image()]]
    generator = np.random.default_rng(case.seed)
    count = int(generator.integers(1, MOST_IMAGES + 1))
    images = [image(case.seed + 7919 * index) for index in range(count)]
    # the first image before the text, any others after it
    prompt = token + text + token * (count - 1)
    if generator.random() < 0.5:
        return [prompt], [images]
    other = case.prompts[-1] if isinstance(case.prompts[-1], str) else FALLBACK_TEXT
    return [prompt, other], [images, []]


def image_inputs(model: VisionModel, case: Case) -> tuple[Any, list]:
    """The case's image batch as a trace takes it: ``model.trace(prompts, images=images)``.

    One image goes flat (``images=[image]``); several go one list per prompt
    (``images=[[a, b]]``), the form every processor reads as "these images
    belong to this prompt" (LLaVA-OneVision reads a flat list as one image per
    prompt). A helper cannot open the trace itself: nnsight reads the
    ``with`` block from the frame that calls ``trace`` or ``generate``.
    """
    prompts, images = image_batch(model, case)
    if len(prompts) == 1:
        return prompts[0], images[0] if len(images[0]) == 1 else images
    return prompts, images


def read_image(model: VisionModel, case: Case, plan: list[tuple[Any, str]]) -> list[torch.Tensor]:
    """Each ``(host, name)`` of ``plan`` in one trace of the case's image batch, in order; ``host`` a function of the model."""
    values: list[torch.Tensor] = []
    prompts, images = image_inputs(model, case)
    with torch.no_grad(), model.trace(prompts, images=images):
        for host, name in plan:
            values.append(get(host(model), name).detach().clone())
    return values


def block(layer: int) -> Any:
    """The tower block ``layer`` of a model."""
    return lambda model: model.vision.layers[layer]


def vision_blocks(model: VisionModel, *names: str) -> list[int]:
    """The tower blocks that serve every one of ``names``; ``Skip`` saying why when none does."""
    support = model.vision.support()
    blocks = [
        layer
        for layer in range(model.vision.num_layers)
        if all(not support.get(name) or layer not in support[name] for name in names)
    ]
    if not blocks:
        raise Skip(f"no tower block has {', '.join(names)} ({ {name: support.get(name) for name in names} })")
    return blocks


@check("vision", applies=has_vision)
def vision_contribution(model: VisionModel, case: Case) -> str:
    """On every tower block: layer_input + attention_output + mlp_output == layer_output."""
    names = ("layer_input", "self_attn.attention_output", "mlp.mlp_output", "layer_output")
    blocks = vision_blocks(model, *names)
    # one trace per value, so a value pointed at the wrong place still reads and the identity is what fails
    found = {name: read_image(model, case, [(block(layer), name) for layer in blocks]) for name in names}
    gaps = Gaps()
    for index, layer in enumerate(blocks):
        parts = [found[name][index] for name in names[:3]]
        output = found["layer_output"][index]
        what = f"vision.layers[{layer}]: layer_input + attention_output + mlp_output against layer_output"
        gaps.add(
            expect_holds(
                CONTRIBUTION, what, output.float(), stream_sum(parts[0], parts[1:]), dtype=coarsest(*parts, output)
            )
        )
    return str(gaps)


@check("vision", applies=has_vision)
def vision_pattern_is_softmax_of_scores(model: VisionModel, case: Case) -> str:
    """On every tower block: softmax(attention_scores) == attention_probabilities, each row summing to one."""
    names = ("self_attn.attention_scores", "self_attn.attention_probabilities")
    blocks = vision_blocks(model, *names)
    values = iter(read_image(model, case, [(block(layer), name) for layer in blocks for name in names]))
    gaps = Gaps()
    for layer in blocks:
        scores, pattern = next(values), next(values)
        what = f"vision.layers[{layer}]: softmax(attention_scores) against attention_probabilities"
        gaps.add(expect_holds(PATTERN_IS_SOFTMAX_OF_SCORES, what, pattern, softmax_pattern(scores).to(pattern.dtype)))
        sums = pattern.float().sum(-1)
        gaps.add(
            expect_close(
                f"vision.layers[{layer}]: rows of attention_probabilities against one",
                sums,
                torch.ones_like(sums),
                dtype=pattern.dtype,
            )
        )
    return str(gaps)


class ImageRun:
    """The case's image batch in one trace, as ``interior.reads`` takes a run: every query a patch or token of its row."""

    steps = 0

    def __init__(self, model: VisionModel, case: Case) -> None:
        self.prompts, images = image_inputs(model, case)
        self.inputs = {"images": images}

    def real_queries(self, seq: int) -> torch.Tensor:
        return torch.ones(1, 1, seq, 1, dtype=torch.bool)


def tower_block(layer: int) -> Any:
    """The tower block ``layer``, as ``interior.reads`` takes a block."""
    return lambda model: model.vision.layers[layer]


@check("vision", applies=has_vision)
def vision_scores_are_queries_against_keys(model: VisionModel, case: Case) -> str:
    """On every tower block: attention_scores == scaling * queries @ repeat_kv(keys)^T (+ score_bias) where the mask keeps a key."""
    from .interior import KEYS, PATTERN, QUERIES, SCORES, scores_gap

    run, gaps = ImageRun(model, case), Gaps()
    for layer in vision_blocks(model, QUERIES, KEYS, SCORES, PATTERN):
        gaps.add(scores_gap(model, tower_block(layer), run, f"vision.layers[{layer}]"))
    return str(gaps)


@check("vision", applies=has_vision)
def vision_head_outputs_are_pattern_against_values(model: VisionModel, case: Case) -> str:
    """On every tower block: attention_head_outputs == attention_probabilities @ repeat_kv(attention_values)."""
    from .interior import HEADS, PATTERN, VALUES, heads_gap

    run, gaps = ImageRun(model, case), Gaps()
    for layer in vision_blocks(model, VALUES, PATTERN, HEADS):
        gaps.add(heads_gap(model, tower_block(layer), run, f"vision.layers[{layer}]"))
    return str(gaps)


@check("vision", applies=has_vision, drawn=False)
def tower_values_assigned_back_change_nothing(model: VisionModel, case: Case) -> str:
    """Every assignable value of the tower and its blocks, assigned what it reads, leaves the logits as they were."""
    from .edits import assign_each_back

    prompts, images = image_inputs(model, case)
    return assign_each_back(model, model.vision, "vision.", prompts, {"images": images})


@check("vision", applies=has_vision)
def vision_interior_feeds_the_output(model: VisionModel, case: Case) -> str:
    """Writing a tower block's queries, keys or values moves its attention_output (writing them back unchanged does not).

    The interior of a packed tower's attention has no pattern to check it
    against (``PER_IMAGE``); this proves each is read on the attention's path.
    """
    names = ("attention_queries", "attention_keys", "attention_values")
    layer = case.pick(vision_blocks(model, "self_attn.attention_output", *(f"self_attn.{name}" for name in names)))

    def attention(model: VisionModel) -> Any:
        return model.vision.layers[layer].self_attn

    prompts, images = image_inputs(model, case)
    noise = replace(case, edit="noise")
    shifts = []
    with torch.no_grad():
        with model.trace(prompts, images=images):
            baseline = attention(model).attention_output.detach().clone().save()
        for name in names:
            with model.trace(prompts, images=images):
                setattr(attention(model), name, getattr(attention(model), name).clone())
                unchanged = attention(model).attention_output.detach().clone().save()
            with model.trace(prompts, images=images):
                setattr(attention(model), name, noise.edited(getattr(attention(model), name)))
                moved = attention(model).attention_output.detach().clone().save()
            expect_close(
                f"vision.layers[{layer}]: attention_output after writing {name} back unchanged", unchanged, baseline
            )
            shift = (moved - baseline).abs().max().item()
            if shift == 0:
                raise CheckFailure(
                    f"vision.layers[{layer}]: writing {name} left attention_output unchanged: it is not read on the attention's path"
                )
            shifts.append(f"{name} {shift:.3g}")
    return f"vision.layers[{layer}]: attention_output moved by " + ", ".join(shifts)


@check("vision", applies=has_vision)
def image_features_reach_the_text(model: VisionModel, case: Case) -> str:
    """layers[0].layer_input[image_token_mask] == image_features, one feature row per image token; a row with no image reads as alone."""
    vision = operator.attrgetter("vision")
    mask, features, stream = read_image(
        model,
        case,
        [(vision, "image_token_mask"), (vision, "image_features"), (lambda model: model.layers[0], "layer_input")],
    )
    tokens = int(mask.sum())
    if tokens == 0:
        raise CheckFailure("image_token_mask marks no token of a prompt holding an image")
    if tokens != features.shape[0]:
        raise CheckFailure(f"{tokens} image tokens against {features.shape[0]} rows of image_features")
    gaps = Gaps()
    gaps.add(expect_close("layers[0].layer_input at the image tokens against image_features", stream[mask], features))
    prompts, images = image_batch(model, case)
    detail = f"{tokens} image tokens of {sum(map(len, images))} image(s)"
    if len(prompts) > 1:
        if mask[1].any():
            raise CheckFailure("image_token_mask marks tokens of the batch's prompt that holds no image")
        gaps.add(_alone(model, case))
        detail += ", and a row with no image reading as it does alone"
    return f"{detail}; {gaps}"


def _alone(model: VisionModel, case: Case) -> float:
    """The gap between the image batch's row 1 (no image) and that row's own tokens traced alone.

    The row's encoding is the processor's (a processor may rewrite a prompt:
    PaliGemma adds its prefix, marks it with token_type_ids), so the row is
    traced alone with every per-token field the batch gave it; a trace pads
    an image batch on the right, so its real tokens come first.
    """
    prompts, images = image_inputs(model, case)
    with torch.no_grad(), model.trace(prompts, images=images):
        inputs = model.inputs.save()
        logits = model.logits.detach().clone().save()
    kwargs = inputs[1]
    ids = kwargs["input_ids"]
    length = int(kwargs["attention_mask"][1].sum())
    row = {
        key: value[1:2, :length]
        for key, value in kwargs.items()
        if key != "labels" and isinstance(value, torch.Tensor) and value.shape == ids.shape
    }
    with torch.no_grad(), model.trace(row):
        alone = model.logits.detach().clone().save()
    return expect_close(
        "logits of the batch's row with no image against its tokens traced alone", logits[1, :length], alone[0]
    )


@check("vision", applies=has_vision)
def written_image_values_move_downstream(model: VisionModel, case: Case) -> str:
    """Writing image_features moves the logits (writing them back unchanged does not); writing patch_embeddings moves tower_output."""
    prompts, images = image_inputs(model, case)
    with torch.no_grad():
        with model.trace(prompts, images=images):
            baseline = model.logits.detach().clone().save()
        with model.trace(prompts, images=images):
            model.vision.image_features = model.vision.image_features.clone()
            unchanged = model.logits.detach().clone().save()
        with model.trace(prompts, images=images):
            model.vision.image_features = case.edited(model.vision.image_features.unsqueeze(0))[0]
            moved = model.logits.detach().clone().save()
        with model.trace(prompts, images=images):
            tower = model.vision.tower_output.detach().clone().save()
        with model.trace(prompts, images=images):
            # noise, whatever the case's edit: a norm right after the patch embedding (GLM-4V's) undoes a scale
            model.vision.patch_embeddings = replace(case, edit="noise").edited(model.vision.patch_embeddings)
            edited_tower = model.vision.tower_output.detach().clone().save()
    expect_close("logits after writing image_features back unchanged", unchanged, baseline)
    shift = (moved - baseline).abs().max().item()
    if shift == 0:
        raise CheckFailure(
            "writing image_features left the logits unchanged: the value is not what the text model receives"
        )
    tower_shift = (edited_tower - tower).abs().max().item()
    if tower_shift == 0:
        raise CheckFailure(
            "writing patch_embeddings left tower_output unchanged: one of them is not on the tower's path"
        )
    return f"image_features moved the logits by up to {shift:.3g}; patch_embeddings moved tower_output by up to {tower_shift:.3g}"


@check("vision", applies=has_vision)
def projector_output_reaches_the_scatter(model: VisionModel, case: Case) -> str:
    """Writing projector_output moves image_features (writing it back unchanged does not): the projector feeds the scatter.

    Whatever the wrapper does between them (a reshape, a reorder, a cast, a
    scale), what the projector returns is what becomes the image features.
    """
    reason = model.projector.support().get("projector_output")
    if reason is not None:
        raise Skip(f"projector_output is unavailable: {reason}")
    prompts, images = image_inputs(model, case)
    noise = replace(case, edit="noise")
    with torch.no_grad():
        with model.trace(prompts, images=images):
            baseline = model.vision.image_features.detach().clone().save()
        with model.trace(prompts, images=images):
            model.projector.projector_output = model.projector.projector_output.clone()
            unchanged = model.vision.image_features.detach().clone().save()
        with model.trace(prompts, images=images):
            model.projector.projector_output = noise.edited(model.projector.projector_output)
            moved = model.vision.image_features.detach().clone().save()
    expect_close("image_features after writing projector_output back unchanged", unchanged, baseline)
    shift = (moved - baseline).abs().max().item()
    if shift == 0:
        raise CheckFailure(
            "writing projector_output left image_features unchanged: the projector named is not what feeds the scatter"
        )
    return f"projector_output moved image_features by up to {shift:.3g}"


#: decode steps the generation check runs after the prompt's
STEPS = 3


@check("vision", applies=has_vision)
def image_reaches_the_text_under_generate(model: VisionModel, case: Case) -> str:
    """Under generate, step 0 runs the tower first, then the image features land at the image tokens; later steps are one token."""
    import nnsight

    prompts, images = image_inputs(model, case)
    with torch.no_grad(), model.trace(prompts, images=images):
        traced = model.vision.image_features.detach().clone().save()
    with (
        torch.no_grad(),
        model.generate(prompts, images=images, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False) as tracer,
    ):
        steps = nnsight.save([])
        for index in tracer.iter[:STEPS]:
            if index == 0:
                # the tower runs before the first step's forward, so its values come first
                tower = model.vision.tower_output.detach().clone()
                mask = model.vision.image_token_mask
                features = model.vision.image_features.detach().clone()
                steps.append((tower, mask, features, model.layers[0].layer_input.detach().clone()))
            else:
                steps.append(model.layers[0].layer_input.shape[1])
    if len(steps) != STEPS:
        raise CheckFailure(f"read {len(steps)} steps of {STEPS}")
    tower, mask, features, stream = steps[0]
    gaps = Gaps()
    gaps.add(expect_close("step 0: layer_input at the image tokens against image_features", stream[mask], features))
    gaps.add(expect_close("step 0's image_features against a trace's", features, traced))
    later = [length for length in steps[1:] if length != 1]
    if later:
        raise CheckFailure(f"decode steps of {later} positions, expected one each")
    return f"{STEPS} steps; {gaps}"


@check("vision", applies=has_vision)
def image_values_need_an_image(model: VisionModel, case: Case) -> str:
    """A trace of text alone runs no tower: every image value raises Unavailable saying so, rather than a stale or empty value."""
    from nnterp.errors import Unavailable

    image_token(model, case)  # Skip where the load takes no image at all
    text = case.prompts[0] if isinstance(case.prompts[0], str) else FALLBACK_TEXT
    names = ("image_features", "tower_output", "patch_embeddings")
    raised = []
    for name in names:
        try:
            with torch.no_grad(), model.trace(text):
                get(model.vision, name).save()
        except Unavailable as error:
            raised.append(str(error))
            continue
        except Exception as error:  # anything else is the failure this check names
            raise CheckFailure(
                f"vision.{name} on a trace with no image raised {type(error).__name__}: {str(error)[:200]}, rather than raising Unavailable"
            ) from error
        raise CheckFailure(f"vision.{name} read a value on a trace with no image, rather than raising Unavailable")
    return f"{len(raised)} image values unavailable without an image ({raised[0][:60]}...)"


from . import tower_gradients as _gradients  # noqa: E402, F401 - registration: gradients of the tower's values, on its image batch
from . import vision_blocks as _registered  # noqa: E402, F401 - registration: the blocks' and the projector's values, after the tower's (not as vision_blocks, the function above)
