"""What a vision family's own tests are built from: components pointed at the wrong tensor on purpose, and the tests' base.

Key a component on a tower's module type with ``nnterp_conformance.variants.with_envoys``
and the check the break is about must fail, naming the block; ``VisionFamilyTests``
runs each such break, and the text-only trace, for a family's tiny checkpoint.
Test code, beside the tests (it needs pytest and nnterp-conformance): ``conftest.py``
puts this folder on ``sys.path``, and a test file imports it as ``vision_harness``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import torch
from nnterp import EProperty, Unavailable
from nnterp import registry
from nnterp_conformance.mutants import moved

from nnterp_vision.components import VisionAttention, no_images
from nnterp_vision.components.qwen import QwenVisionAttention
from nnterp_vision.layouts import ImageFeatures
from nnterp_vision.reasons import NO_IMAGE, NO_PROCESSOR


class WrongContribution(VisionAttention):
    """The attention's contribution read at its query projection: the right shape, the wrong tensor."""

    attention_output = VisionAttention.attention_output.at("q_proj.output")


class PatternAtScores(VisionAttention):
    """The pattern read at the scores entering the softmax."""

    attention_probabilities = VisionAttention.attention_probabilities.at(
        "source.attention_interface_1.source.nn_functional_softmax_0.input"
    )


QueriesKeysSwapped = moved(
    VisionAttention, "The queries served as the keys and the keys as the queries: a tower has as many key heads as query heads, so the shapes agree.",
    called="QueriesKeysSwapped", attention_queries="attention_keys", attention_keys="attention_queries",
)

ValuesAsKeys = moved(
    VisionAttention, "The values read at the keys' operation: the same layout, another tensor.", called="ValuesAsKeys", attention_values="attention_keys",
)


class QwenWrongContribution(QwenVisionAttention):
    """The Qwen ViT attention's contribution read at its output projection's input: the right shape, the wrong tensor."""

    attention_output = QwenVisionAttention.attention_output.at("proj.input")


class OutProjWrongContribution(QwenVisionAttention):
    """``QwenWrongContribution`` on a tower whose output projection keeps SigLIP's name, ``out_proj``."""

    attention_output = QwenVisionAttention.attention_output.at("out_proj.input")


def features_at(tower: type, path: str, why: str, rows: Callable[[torch.Tensor], torch.Tensor] | None = None) -> type:
    """``tower`` with ``image_features`` read at ``path`` (``/`` the model's root), ``why`` saying what is there instead.

    ``rows`` lays the value out one row per image token (default: the first two dimensions flattened). Wrong on purpose,
    so the check reading the features, ``image_features_reach_the_text`` mostly, must fail.
    """

    def image_features(self: Any, value: torch.Tensor) -> ImageFeatures:
        return value.flatten(0, 1) if rows is None else rows(value)

    moved = EProperty(path, why, no_images)(image_features)
    name = tower.__name__ + "FeaturesAt" + "".join(part.title() for part in re.split(r"\W+", path))
    return type(name, (tower,), {"image_features": moved, "__doc__": f"image_features read at {why}."})


def features_returned(tower: type) -> type:
    """``tower`` with ``image_features`` read at the copy the inner model returns after the text model ran: equal, and causally inert.

    Reading passes; writing moves nothing, which ``written_image_values_move_downstream`` must catch.
    """
    moved = tower.image_features.at("/model.output", select="image_outputs")
    own = moved._preprocess
    read: dict[int, Any] = {}

    def returned(envoy: Any, value: Any) -> Any:
        # transformers 5.24 returns the tower's output as ``image_outputs``; the features it scattered are its pooled
        # output (a tensor, or one per image, joined in token order as 5.23's image_hidden_states held them)
        read[id(envoy)] = value
        pooled = value.pooler_output
        return own(envoy, torch.cat([one.flatten(0, -2) for one in pooled]) if isinstance(pooled, (list, tuple)) else pooled)

    def written(envoy: Any, value: torch.Tensor) -> Any:
        # back into the tower's output the model returned, which nothing downstream reads
        outputs = read[id(envoy)]
        pooled = outputs.pooler_output
        if isinstance(pooled, (list, tuple)):
            parts = value.reshape(-1, value.shape[-1]).split([one.flatten(0, -2).shape[0] for one in pooled])
            outputs.pooler_output = [part.reshape(one.shape) for part, one in zip(parts, pooled)]
        else:
            outputs.pooler_output = value.reshape(pooled.shape)
        return outputs

    # no write-back laying a read view back out: this read is the returned copy, which nothing downstream reads
    moved = moved.evolve(read=returned, write=written, write_back=None)
    return type(f"{tower.__name__}FeaturesReturned", (tower,), {"image_features": moved, "__doc__": features_returned.__doc__})


def tower_breaks(attention: type, tower: type, misread: type, message: str, returned: type | None = None) -> tuple[tuple[str, dict, str], ...]:
    """The breaks a tower's family is shown failing on, as ``VisionFamilyTests.breaks`` rows.

    The attention module type ``attention`` keyed to a wrong contribution, to
    a pattern read at the scores, to its queries and keys swapped and to its
    values read as its keys; the tower module type ``tower`` keyed to
    ``misread`` (its image features read elsewhere: the check fails with
    ``message``) and, given ``returned`` (the tower's component), to the
    features the model returns, which a write cannot move.
    """
    rows = [
        ("vision_contribution", {attention: WrongContribution}, "against layer_output: off by"),
        ("vision_pattern_is_softmax_of_scores", {attention: PatternAtScores}, "against attention_probabilities: off by"),
        ("vision_scores_are_queries_against_keys", {attention: QueriesKeysSwapped}, "queries @ keys^T against attention_scores"),
        ("vision_head_outputs_are_pattern_against_values", {attention: ValuesAsKeys}, "attention_probabilities @ attention_values"),
        ("image_features_reach_the_text", {tower: misread}, message),
    ]
    if returned is not None:
        rows.append(("written_image_values_move_downstream", {tower: features_returned(returned)}, "left the logits unchanged"))
    return tuple(rows)


class VisionFamilyTests:
    """The tests every vision family's own test file runs: a text-only trace refuses the image values, and each kit check
    it lists fails on the family broken where that check looks.

    Subclass it once per tiny checkpoint and set the class attributes, as the kit's ``BaseConformance`` is subclassed
    (the base, named without ``Test``, is not collected on its own)::

        class TestLlava(VisionFamilyTests):
            checkpoint = "llava"
            breaks = (("vision_contribution", {CLIPAttention: WrongContribution}, "against layer_output: off by"),)

    What the kit proves on every registered checkpoint (each check passing, on fixed prompts and drawn cases, and the
    family's declared ``skips``) is not run again here. Where a family's text-only trace shows more, the subclass
    extends ``test_no_image_makes_image_values_unavailable`` and calls ``super()``; a file's own tests outside the class
    build their variants with ``TestLlava.broken({...})``; the tests' conftest runs them on each checkpoint the file's
    subclasses name, so one file tests a family and its siblings over one set of functions.
    """

    #: the registered tiny checkpoint the tests load
    checkpoint: ClassVar[str]
    #: ``(check, {module type or path: component}, message)``: the check passes on the family and fails with ``message``
    #: in its detail on the family with those envoys swapped in
    breaks: ClassVar[tuple[tuple[str, dict, str], ...]] = ()
    #: the image values a text-only trace must refuse, as paths from the model (``"vision.layers.0.layer_output"``)
    no_image_values: ClassVar[tuple[str, ...]] = ("vision.image_features",)

    @pytest.fixture(scope="class")
    @classmethod
    def model(cls, tiny_model: Any) -> Any:
        """The checkpoint as registered, loaded once a session (the plugin's ``tiny_model`` caches it)."""
        return tiny_model(cls.checkpoint)

    @classmethod
    def broken(cls, envoys: dict) -> Any:
        """The checkpoint loaded as registered, but with its family's components for the keys of ``envoys`` swapped."""
        from nnterp_conformance.runner import load
        from nnterp_conformance.variants import with_envoys

        family = registry.family_named(registry.checkpoint_family(cls.checkpoint))
        return load(cls.checkpoint, family=with_envoys(family, envoys))

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if metafunc.definition.originalname == "test_check_fails_on_a_broken_family":
            if not self.breaks:
                raise pytest.UsageError(f"{type(self).__name__} lists no breaks: name a check and a component that breaks it")
            metafunc.parametrize(("check", "envoys", "message"), self.breaks, ids=break_ids(self.breaks))

    def test_no_image_makes_image_values_unavailable(self, model: Any) -> None:
        for path in self.no_image_values:
            with pytest.raises(Unavailable, match="passes no image"):
                with torch.no_grad(), model.trace("Hello world"):
                    value(model, path).save()
        with torch.no_grad(), model.trace("Hello world"):
            text = model.layers[0].layer_output.save()  # the text model's values are untouched
        assert text.shape[-1] == model.hidden_size
        assert NO_IMAGE.startswith("this trace passes no image")

    def test_check_fails_on_a_broken_family(self, model: Any, check: str, envoys: dict, message: str) -> None:
        from nnterp_conformance.variants import assert_breaks

        assert_breaks(check, model, self.broken(envoys), message)


def value(model: Any, path: str) -> Any:
    """The envoy or value at ``path`` from ``model``, a dotted path whose numbers index (``"vision.layers.-1.layer_output"``)."""
    found = model
    for part in path.split("."):
        found = found[int(part)] if part.lstrip("-").isdigit() else getattr(found, part)
    return found


def read(model: Any, prompt: Any, *paths: str, images: list | None = None) -> list[torch.Tensor]:
    """The value at each of ``paths`` (as ``value`` walks them), in one trace of ``prompt`` and ``images`` (the checks'
    image by default): copies, in the order given, which must be the order the forward computes them in."""
    from nnterp_conformance.checks.vision import image

    values = []
    with torch.no_grad(), model.trace(prompt, images=[image()] if images is None else images):
        for path in paths:
            values.append(value(model, path).detach().clone().save())
    return values


def break_ids(breaks: tuple[tuple[str, dict, str], ...]) -> list[str]:
    """Each break's test id: its check's name, and where the check is broken more than once, the components swapped in."""
    checks = [check for check, _, _ in breaks]
    return [
        check if checks.count(check) == 1 else "-".join([check, *(component.__name__ for component in envoys.values())])
        for check, envoys, _ in breaks
    ]


# -- what several families' own tests check the same way -------------------------------------------------------------

#: one invoke's two prompts: two images in the first (the checks' images 1 and 2), none in the second
MIXED = ("<image>Hello<image> world", "The cat sat on the mat again")
#: LLaVA-NeXT's anyres on the tiny grid pinpoints: the checks' 40 x 48 image is the base crop and four tiles of 64 x 64
ANYRES_CROPS = 5
#: its image tokens: the base crop's 16, then the 8 x 8 tile grid unpadded to 6 rows of 8, each row closed by a newline
ANYRES_BASE, ANYRES_ROWS, ANYRES_COLUMNS = 16, 6, 8
ANYRES_TOKENS = ANYRES_BASE + ANYRES_ROWS * (ANYRES_COLUMNS + 1)
#: what the image-features check says when an any-resolution family's features are read before the packing
ANYRES_MISREAD = f"{ANYRES_TOKENS} image tokens against {ANYRES_CROPS * 16} rows"


def unpacked_features(tower: type) -> type:
    """``tower`` with ``image_features`` read at the projector's output, every crop's rows: LLaVA's reading, before an any-resolution packing."""
    return features_at(tower, "/projector.output", "the projector's output, every crop's rows: LLaVA's reading, before the packing")


def transposed_squares(tower: type) -> type:
    """``tower`` with ``image_features`` read at the projector's output with each crop's token grid transposed: the right rows, the wrong order."""
    return features_at(
        tower, "/projector.output", "the projector's output with each crop's token grid transposed: the right rows, the wrong order",
        rows=lambda value: value.transpose(1, 2).flatten(0, -2),
    )
#: the checks' 40 x 48 image, resized to 32 x 48 by a Qwen-style processor: a 4 x 6 grid of 8-pixel patches, 2 x 3 merge
#: blocks of 2 x 2, one image token each
MERGED_PATCHES, MERGED_TOKENS = 24, 6
#: the second image of a packed pair: 24 high, 16 wide, so 6 x 4 patches of the tiny Pixtral tower's 4 pixels
SMALL_PATCHES = 24


def assert_no_processor(model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With its processor taken away, ``model`` is a text-only load: the tower's values, each block's too, say no image
    reaches the model, and the check reading them skips."""
    from nnterp_conformance.checks import verdict
    from nnterp_conformance.runner import PROMPTS

    monkeypatch.setattr(model, "processor", None)
    support = model.vision.support()
    blocks = dict.fromkeys(range(model.vision.num_layers), NO_PROCESSOR)
    assert support["image_features"] == NO_PROCESSOR and support["layer_output"] == blocks
    assert verdict("image_features_reach_the_text", model, PROMPTS).status == "skip"


def assert_tree(model: Any, vision: type, at: str, projector: type | None, projector_at: str) -> None:
    """``model.vision`` is a ``vision`` served at ``at`` and ``model.projector`` a ``projector`` (any, where None) at
    ``projector_at``: paths from the model, as ``value`` walks them."""
    assert isinstance(model.vision, vision) and model.vision is value(model, at)
    assert (projector is None or isinstance(model.projector, projector)) and model.projector is value(model, projector_at)


def assert_tiny_vit(vision: Any, patch_size: int = 8, image_size: int = 32) -> None:
    """``vision`` is the tiny CLIP- or SigLIP-layout tower: 2 blocks 64 wide, 4 heads of 16, an MLP 128 wide, ``patch_size``
    pixels a patch on ``image_size`` a side, and its attention's ``out_proj`` served as ``o_proj``."""
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.image_size, vision.intermediate_size) == (patch_size, image_size, 128)
    assert vision.layers[0].self_attn.o_proj is vision.layers[0].self_attn.out_proj


def assert_tiny_pixtral(vision: Any) -> None:
    """``vision`` is the tiny Pixtral tower: 2 blocks 64 wide, 4 heads of 16, 4-pixel patches, an MLP 128 wide, its blocks'
    native names aliased, and no one image size (it takes any resolution)."""
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim) == (2, 64, 4, 16)
    assert (vision.patch_size, vision.intermediate_size) == (4, 128)
    block = vision.layers[0]
    assert block.self_attn is block.attention and block.mlp is block.feed_forward
    assert block.input_layernorm is block.attention_norm and block.post_attention_layernorm is block.ffn_norm
    with pytest.raises(Unavailable, match="takes any resolution"):
        vision.image_size


def mixed_invoke(model: Any, *paths: str) -> list[torch.Tensor]:
    """``read`` in one invoke of the ``MIXED`` prompts, the first with two images, the second text alone."""
    from nnterp_conformance.checks.vision import image

    return read(model, list(MIXED), *paths, images=[[image(1), image(2)], []])


def assert_mixed_invoke_scatters(model: Any, image_tokens: int) -> None:
    """In one invoke of the ``MIXED`` prompts, the first (two images) has ``image_tokens`` image tokens, the second
    (text alone) none, and the stream entering the text model holds the image features at exactly those tokens."""
    mask, features, stream = mixed_invoke(model, "vision.image_token_mask", "vision.image_features", "layers.0.layer_input")
    assert mask[0].sum() == image_tokens and not mask[1].any() and torch.equal(stream[mask], features)


def aligner_misread(tower: type, first_linear: str) -> type:
    """``tower`` with ``image_features`` read at the aligner's first linear layer (``first_linear``), before its activation and second layer."""
    return features_at(tower, f"/projector.{first_linear}.output", "the aligner's first linear layer, before its activation and second layer")


def assert_anyres_packed(model: Any, features: torch.Tensor, projected: torch.Tensor) -> None:
    """``features`` are ``projected`` (the base crop's rows, then the 2 x 2 tiles') packed as LLaVA-NeXT packs the checks'
    image: the base crop, then the tile grid's rows unpadded (one padded row cropped off the top), each closed by the
    model's newline row."""
    rows, columns = ANYRES_ROWS, ANYRES_COLUMNS
    assert torch.equal(features[:ANYRES_BASE], projected[0])
    grid = features[ANYRES_BASE:].unflatten(0, (rows, columns + 1))
    assert torch.equal(grid[:, -1], model.model.image_newline.detach().expand(rows, -1))
    # each unpadded row's features are the projection's, from the tile it falls in
    tiles = projected[1:].unflatten(0, (2, 2)).unflatten(2, (columns // 2, columns // 2))  # tile row, tile column, row, column
    full = tiles.permute(0, 2, 1, 3, 4).flatten(2, 3).flatten(0, 1)  # [8 rows, 8 columns, hidden]
    assert torch.equal(grid[:, :-1], full[1 : 1 + rows])


def shuffled_squares(patches: torch.Tensor, side: int = 4) -> torch.Tensor:
    """``[crops, side * side, width]`` patches as a pixel shuffle by 2 hands them on: ``[crops, side / 2, side / 2, 4 width]``,
    the token at (row, column) holding patches (2 row + i, 2 column + j), i slowest, in raster order."""
    grid = patches.unflatten(1, (side, side))  # crops, rows, columns, width
    return grid.unflatten(1, (side // 2, 2)).unflatten(3, (side // 2, 2)).permute(0, 1, 3, 2, 4, 5).flatten(3)


def unembedded(model: Any, prompt: str = "Hello world") -> tuple[torch.Tensor, torch.Tensor]:
    """The model's logits on ``prompt``, and its ``lm_head`` on its final norm of the last layer's output: equal where the
    wrapper scales nothing."""
    with torch.no_grad(), model.trace(prompt):
        last = model.layers[-1].layer_output.save()
        logits = model.logits.save()
    with torch.no_grad():
        return model.lm_head._module(model.norm._module(last)), logits


def layer_scaled(model: Any, prompt: str) -> torch.Tensor:
    """Assert tower block 0's contributions are its attention's and MLP's outputs times the block's ``lambda_1`` and
    ``lambda_2`` (InternViT's layer scale); the attention's output, unscaled."""
    block = model.vision.layers[0]
    attention, contribution, mlp, mlp_contribution = read(
        model, prompt, "vision.layers.0.self_attn.output.0", "vision.layers.0.self_attn.attention_output",
        "vision.layers.0.mlp.output", "vision.layers.0.mlp.mlp_output",
    )
    assert torch.equal(contribution, attention * block._module.lambda_1)
    assert torch.equal(mlp_contribution, mlp * block._module.lambda_2)
    return attention


def packed_pair(model: Any, prompt: str, *paths: str) -> list[torch.Tensor]:
    """``read`` of ``prompt`` (two image placeholders) with the checks' image, then a second one 24 high and 16 wide."""
    from nnterp_conformance.checks.vision import image

    return read(model, prompt, *paths, images=[image(), image(1).resize((16, 24))])


def assert_packed_apart(patches: torch.Tensor, pattern: torch.Tensor, first: int) -> None:
    """Two images packed in one row of the tiny Pixtral tower (64 wide, 4 heads), ``first`` patches then
    ``SMALL_PATCHES``: no patch attends to the other image's."""
    total = first + SMALL_PATCHES
    assert patches.shape == (1, total, 64) and pattern.shape == (1, 4, total, total)
    assert pattern[..., :first, first:].abs().max() == 0 and pattern[..., first:, :first].abs().max() == 0


def assert_one_packed_row(model: Any, prompt: str, patches: int, tokens: int) -> None:
    """The checks' image is one row of ``patches`` patches of the tiny Pixtral tower, which the patch merger takes squeezed
    and merges into ``tokens`` rows: the scattered features."""
    mask, found, tower, selected, projected, features = read(
        model, prompt, "vision.image_token_mask", "vision.patch_embeddings", "vision.tower_output",
        "projector.projector_input", "projector.projector_output", "vision.image_features",
    )
    assert found.shape == (1, patches, 64) and tower.shape == (1, patches, 64)
    assert mask.sum() == tokens and projected.shape == (tokens, 64)
    assert torch.equal(selected, tower[0]) and torch.equal(projected, features)


def assert_merge_blocks_are_tokens(model: Any, prompt: str, width: int) -> None:
    """The checks' image, ``MERGED_PATCHES`` patches of a tower ``width`` wide, merged into ``MERGED_TOKENS`` 64-wide rows
    that the scatter hands the text model unchanged."""
    mask, tower, merged, features = read(
        model, prompt, "vision.image_token_mask", "vision.tower_output", "projector.projector_output", "vision.image_features"
    )
    assert int(mask.sum()) == MERGED_TOKENS and tower.shape == (1, MERGED_PATCHES, width)
    assert merged.shape == (MERGED_TOKENS, 64) and torch.equal(merged, features)


def assert_attention_whole(model: Any, block: int, queries, keys, values, heads, contribution) -> None:
    """Tower block ``block``'s attention on one image, read whole: its output projection of the head outputs is the
    contribution, and the head outputs are softmax(q k^T / sqrt(d)) v over the image's whole row of patches."""
    projection = model.vision.layers[block].self_attn.o_proj._module
    assert torch.allclose(projection(heads.flatten(-2)), contribution, atol=1e-6)
    pattern = torch.softmax(queries @ keys.transpose(-1, -2) / queries.shape[-1] ** 0.5, dim=-1)
    assert torch.allclose((pattern @ values).transpose(1, 2), heads, atol=1e-6)
