"""Tiny checkpoints: written once, the same bytes for the same name, loaded through the real path."""

import json

import pytest
from nnterp_conformance.checkpoints import build_tokenizer, names, spec, tiny_checkpoint


def _files(directory):
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def test_same_name_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTERP_CHECKPOINTS", str(tmp_path / "first"))
    first = tiny_checkpoint("gpt2")
    monkeypatch.setenv("NNTERP_CHECKPOINTS", str(tmp_path / "second"))
    second = tiny_checkpoint("gpt2")
    assert first.parent != second.parent
    assert _files(first) == _files(second)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(_files(first))


def test_written_once_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("NNTERP_CHECKPOINTS", str(tmp_path))
    path = tiny_checkpoint("llama")
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert tiny_checkpoint("llama") == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp


def test_the_config_is_shrunk_as_registered():
    path = tiny_checkpoint("llama")
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "llama"
    for field, value in spec("llama").fields.items():
        assert config[field] == value


def test_the_tokenizer_fits_every_registered_vocabulary():
    size = len(build_tokenizer())
    for name in names():
        assert spec(name).config().get_text_config().vocab_size >= size, name


def test_an_unknown_name_lists_the_registered_ones():
    with pytest.raises(LookupError, match="registered: .*gpt2"):
        tiny_checkpoint("no-such-model")


@pytest.mark.parametrize("model_type", ["glm46v", "video_llama_3", "llava"])
def test_nested_configs_declared_through_autoconfig_are_shrunk(model_type):
    # a wrapper declaring text_config through AutoConfig once came out at its full (9B) size
    from nnterp.tiny import TinyConfig

    config = TinyConfig(model_type).config()
    for nested in (config.text_config, config.vision_config):
        assert nested.hidden_size <= 64, (model_type, type(nested).__name__, nested.hidden_size)


def test_nested_fields_naming_a_model_type_go_on_that_types_shrunk_sizes():
    from nnterp.tiny import TinyConfig

    config = TinyConfig("llava", {"text_config": {"model_type": "mistral", "num_hidden_layers": 3}}).config()
    assert type(config.text_config).__name__ == "MistralConfig"
    assert (config.text_config.num_hidden_layers, config.text_config.hidden_size) == (3, 64)


def test_the_cache_key_covers_the_code_that_writes_a_checkpoint():
    # a changed processor writer once kept serving the checkpoint written by the old one
    from dataclasses import dataclass

    from nnterp.tiny import TinyConfig
    from nnterp_conformance.checkpoints import _digest

    @dataclass(frozen=True)
    class OneWriter(TinyConfig):
        def save_preprocessors(self, directory, tokenizer, config):
            return "one"

    @dataclass(frozen=True)
    class OtherWriter(TinyConfig):
        def save_preprocessors(self, directory, tokenizer, config):
            return "other"

    assert _digest(OneWriter("llama")) != _digest(OtherWriter("llama"))
    assert _digest(TinyConfig("llama")) == _digest(TinyConfig("llama"))
