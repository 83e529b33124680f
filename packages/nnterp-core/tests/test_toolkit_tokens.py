"""Readable tokens (nnterp.toolkit.tokens) on a byte-level BPE tokenizer (the tiny checkpoints') and a SentencePiece-style byte-fallback one."""

import pytest
import torch
from nnterp import InvalidArgument
from nnterp.toolkit.lens import logit_lens
from nnterp.toolkit.tokens import str_tokens, token_bytes, token_labels

TEXT = "日本語 café 🙂"


def byte_fallback_tokenizer():
    """A Llama-2-style tokenizer: a ``▁`` prefix, BPE with ``<0xNN>`` byte fallback, Llama's decoder (leading space stripped)."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"<0x{byte:02X}>": 3 + byte for byte in range(256)})
    for piece in ["▁", "c", "a", "f", "é", "本", "\ufffd", "▁c", "▁ca", "▁caf"]:
        vocab[piece] = len(vocab)
    bpe = models.BPE(vocab=vocab, merges=[("▁", "c"), ("▁c", "a"), ("▁ca", "f")], unk_token="<unk>", byte_fallback=True)
    tokenizer = Tokenizer(bpe)
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def check_labels(tokenizer, ids, text):
    labels = token_labels(tokenizer, ids)
    raw = token_bytes(tokenizer, ids)
    assert len(labels) == len(ids) == len(raw)
    assert all("\ufffd" not in label for label in labels)
    # each label is its decoding where that is whole, else its bytes with the stray ones escaped
    for index, label, held in zip(ids, labels, raw):
        decoded = tokenizer.decode([index])
        assert label == (decoded if "\ufffd" not in decoded else held.decode("utf-8", "backslashreplace"))
    broken = [label for label in labels if "\\x" in label]
    assert broken, "the text must split a character across tokens"
    assert b"".join(raw) == text.encode("utf-8")
    return labels


def test_byte_level_tokens_show_their_bytes(tiny_model):
    model = tiny_model("gpt2")
    ids = model.tokenizer(TEXT)["input_ids"]
    assert any("\ufffd" in model.tokenizer.decode([i]) for i in ids)  # what plain decoding shows
    labels = check_labels(model.tokenizer, ids, TEXT)
    assert labels[0] == "\\xe6"  # the first byte of 日
    assert str_tokens(model, TEXT) == labels
    assert str_tokens(model, torch.tensor(ids)) == labels


def test_byte_fallback_tokens_show_their_bytes():
    tokenizer = byte_fallback_tokenizer()
    ids = tokenizer(TEXT)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert "<0xE6>" in tokens and "本" in tokens and "▁caf" in tokens
    # the dummy prefix is a space the text does not hold
    assert b"".join(token_bytes(tokenizer, ids)) == b" " + TEXT.encode("utf-8")
    assert tokens[0] == "▁"
    labels = check_labels(tokenizer, ids[1:], TEXT)
    assert labels[:3] == ["\\xe6", "\\x97", "\\xa5"] and labels[3] == "本" and "caf" in labels and "é" in labels
    assert str_tokens(tokenizer, TEXT)[1:] == labels


def test_a_token_that_is_the_replacement_character_stays():
    tokenizer = byte_fallback_tokenizer()
    ids = tokenizer("\ufffd")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["▁", "\ufffd"]
    assert token_labels(tokenizer, ids) == ["", "\ufffd"]


def test_str_tokens_are_the_lens_positions(tiny_model):
    model = tiny_model("llama")
    prompts = [TEXT, "Hello world"]
    labels = str_tokens(model, prompts)
    lens = logit_lens(model, prompts)
    assert [len(row) for row in labels] == [len(model.tokenizer(p)["input_ids"]) for p in prompts]
    assert len(labels[0]) == lens.shape[2]  # the longest prompt fills the padded width
    assert labels[1] == str_tokens(model, "Hello world") == [model.tokenizer.decode([i]) for i in model.tokenizer("Hello world")["input_ids"]]


def test_bad_ids_are_refused(tiny_model):
    tokenizer = tiny_model("llama").tokenizer
    with pytest.raises(InvalidArgument, match=r"token_labels\(ids='abc'\).*str_tokens"):
        token_labels(tokenizer, "abc")
    with pytest.raises(InvalidArgument, match=r"(?s)token_labels\(ids=.*one sequence"):
        token_labels(tokenizer, torch.zeros(2, 3, dtype=torch.long))


def test_patching_sweeps_label_positions_with_readable_tokens(tiny_model):
    from nnterp.toolkit.patching import patch_residual

    model = tiny_model("llama")
    sweep = patch_residual(model, TEXT, TEXT, lambda logits: logits[:, -1, 0].mean(), layers=[0], progress=False)
    assert sweep.labels["position"] == str_tokens(model, TEXT)
    assert all("\ufffd" not in label for label in sweep.labels["position"])
