"""The heatmaps: each renders to a PNG of figsize * dpi pixels, or comes back as a Figure; a clear error without matplotlib."""

import struct
import sys

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure
from nnterp.toolkit.patching import Sweep, patch_residual
from nnterp.toolkit.plots import plot_attention, plot_logit_lens, plot_sweep
from nnterp.toolkit.tokens import token_labels

PROMPT = "Mary and John met. J gave it to"


def png_size(path):
    """(width, height) from a PNG's IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def tokens_of(model, prompt=PROMPT):
    return [model.tokenizer.decode([t]) for t in model.tokenizer(prompt)["input_ids"]]


@pytest.mark.parametrize("name", ["llama", "gptj", "gemma2"])
def test_plot_sweep_writes_a_png_of_the_asked_size(tiny_model, name, tmp_path):
    model = tiny_model(name)
    j, m = model.tokenizer("J")["input_ids"][-1], model.tokenizer("M")["input_ids"][-1]
    sweep = patch_residual(
        model, PROMPT, PROMPT.replace(". J", ". M"), lambda logits: (logits[:, -1, j] - logits[:, -1, m]).mean(), progress=False
    )
    path = plot_sweep(sweep, tmp_path / "sweep.png", figsize=(6, 3), dpi=50)
    assert path == tmp_path / "sweep.png"
    assert png_size(path) == (300, 150)
    figure = plot_sweep(sweep, normalized=True)
    assert isinstance(figure, Figure)
    # tokens label the columns as they are, a blank one quoted so it shows
    shown = [token if token.strip() else repr(token) for token in tokens_of(model)]
    assert [label.get_text() for label in figure.axes[0].get_xticklabels()] == shown
    assert [label.get_text() for label in figure.axes[0].get_yticklabels()] == [str(i) for i in range(model.num_layers)]


def test_plot_sweep_labels_heads_and_keeps_nan_cells(tmp_path):
    values = torch.tensor([[0.5, float("nan")], [1.0, -2.0]])
    sweep = Sweep(values, ("layer", "head"), {"layer": ["0", "1"], "head": ["0", "1"]}, 1.0, 0.0, "self_attn.attention_head_outputs")
    figure = plot_sweep(sweep, figsize=(4, 4), dpi=40)
    axes = figure.axes[0]
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("head", "layer")
    assert [t.get_text() for t in axes.get_xticklabels()] == ["0", "1"]
    assert png_size(plot_sweep(sweep, tmp_path / "heads.png", figsize=(4, 4), dpi=40)) == (160, 160)


def test_plot_attention_draws_one_pattern_with_token_labels(tiny_model, tmp_path):
    model = tiny_model("llama")
    with torch.no_grad(), model.trace(PROMPT):
        pattern = model.layers[0].self_attn.attention_probabilities.save()
    tokens = tokens_of(model)
    path = plot_attention(pattern[0, 1], tokens, tmp_path / "attention.png", figsize=(8, 7), dpi=30)
    assert png_size(path) == (240, 210)
    figure = plot_attention(pattern[0, 1], tokens)
    axes = figure.axes[0]
    assert len(axes.get_xticklabels()) == len(axes.get_yticklabels()) == len(tokens)
    drawn = axes.images[0].get_array()
    torch.testing.assert_close(torch.as_tensor(drawn.data), pattern[0, 1].float())
    with pytest.raises(ValueError, match="pattern\\[0, head\\]"):
        plot_attention(pattern, tokens)


def test_plot_logit_lens_colours_by_the_top_token_and_names_it(tiny_model, tmp_path):
    model = tiny_model("llama")
    rows = []
    with torch.no_grad(), model.trace(PROMPT):
        for layer in model.layers:
            rows.append(torch.softmax(model.project_on_vocab(layer.layer_output), -1)[0].cpu())
    probs = torch.stack(rows)  # [layers, seq, vocab]
    tokens = tokens_of(model)
    path = plot_logit_lens(probs, tokens, tmp_path / "lens.png", tokenizer=model.tokenizer, figsize=(10, 4), dpi=20)
    assert png_size(path) == (200, 80)
    figure = plot_logit_lens(probs[None], tokens, tokenizer=model.tokenizer)
    axes = figure.axes[0]
    torch.testing.assert_close(torch.as_tensor(axes.images[0].get_array().data), probs.max(-1).values)
    top = token_labels(model.tokenizer, [int(probs[-1, -1].argmax())])[0]  # bytes shown where a token holds part of a character
    assert len(axes.texts) == probs.shape[0] * probs.shape[1]
    assert axes.texts[-1].get_text().replace("\\n", "\n") in (top, repr(top))
    # a value per cell, and a result object read through its probs and tokens
    values = probs[..., 0]
    lens = type("Lens", (), {"probs": values, "tokens": tokens})()
    figure = plot_logit_lens(lens, None)
    torch.testing.assert_close(torch.as_tensor(figure.axes[0].images[0].get_array().data), values)
    with pytest.raises(ValueError, match="positions"):
        plot_logit_lens(values, tokens[:-1])


def test_without_matplotlib_the_error_says_how_to_install_it(monkeypatch):
    sweep = Sweep(torch.zeros(1, 1), ("layer", "position"), {"layer": ["0"], "position": ["a"]}, 1.0, 0.0)
    for name in [name for name in sys.modules if name == "matplotlib" or name.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for draw in (lambda: plot_sweep(sweep), lambda: plot_attention(torch.eye(1), ["a"]), lambda: plot_logit_lens(torch.zeros(1, 1), ["a"])):
        with pytest.raises(ImportError, match=r"pip install matplotlib.*nnterp-core\[plots\]"):
            draw()
    assert matplotlib  # the real one is back after the test (monkeypatch restores sys.modules)


def test_unprintable_tokens_are_escaped_in_the_tick_labels(tmp_path):
    import warnings

    pattern = torch.softmax(torch.randn(3, 3), -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a glyph the font lacks warns as the PNG renders; an escaped label has none
        figure = plot_attention(pattern, ["\x00", "a\nb", " "])
        figure.savefig(tmp_path / "pattern.png")
    labels = [label.get_text() for label in figure.axes[0].get_xticklabels()]
    assert labels == ["\\x00", "a\\nb", "' '"]
