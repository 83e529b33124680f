"""Dictionaries loaded from Gemma Scope's ``params.npz`` and sparsify's hookpoint folders, against each format's own formula.

Each test writes a file in the format (random weights: numpy's ``savez`` for
Gemma Scope, safetensors and json for sparsify), loads it, and holds
``encode`` / ``forward`` against the format's formula computed here with
torch, and the dictionary spliced at its site against the same formula written
into the model by hand. Sites: gemma2 (Gemma Scope's own family, a sandwich
block), llama (dense pre-norm) and mixtral (a mixture of experts) for
sparsify's hookpoints, gpt2's ``h.<i>`` modules for another base model's names.
"""

import json

import nnterp  # noqa: F401 - before any transformers.models module
import numpy as np
import pytest
import torch
from nnterp import InvalidArgument
from nnterp.toolkit.dictionaries import Dictionary, run_with_dictionary
from nnterp.toolkit.dictionary_formats import sparsify_sites
from safetensors.torch import save_file

PROMPTS = ["The cat sat on the mat", "Dogs ran", "People told stories at night"]
D_SAE = 96


def host_of(model, name):
    *path, value = name.split(".")
    host = model
    for segment in path:
        host = host[int(segment)] if segment.isdigit() else getattr(host, segment)
    return host, value


def read(model, prompts, name):
    """The value ``name`` of one plain trace of ``prompts`` (left-padded, as the toolkit pads them)."""
    with torch.no_grad(), model.trace(prompts):
        host, value = host_of(model, name)
        out = getattr(host, value).clone().save()
    return out


def logits_writing(model, prompts, reads, writes, make):
    """The logits of a run where ``writes`` is replaced by ``make(x)``, x the value at ``reads``, by hand."""
    with torch.no_grad(), model.trace(prompts):
        x = getattr(*host_of(model, reads))
        host, name = host_of(model, writes)
        old = getattr(host, name)
        setattr(host, name, make(x).to(old.dtype))
        logits = model.logits.clone().save()
    return logits


# -- the formats' own formulas ------------------------------------------------------


def gemma_scope_encode(p, x):
    """Gemma Scope's JumpReLUSAE.encode: the pre-activation where it is above the threshold, else zero."""
    pre = x @ p["W_enc"] + p["b_enc"]
    return (pre > p["threshold"]) * torch.relu(pre)


def gemma_scope_decode(p, acts):
    return acts @ p["W_dec"] + p["b_dec"]


def sparsify_encode(w, cfg, x):
    """sparsify's SparseCoder.encode as a dense vector: the top k of ReLU(linear), of x - b_dec for an SAE."""
    if not cfg["transcode"]:
        x = x - w["b_dec"]
    pre = torch.relu(torch.nn.functional.linear(x, w["encoder.weight"], w["encoder.bias"]))
    values, indices = pre.topk(cfg["k"], dim=-1, sorted=False)
    return torch.zeros_like(pre).scatter_(-1, indices, values)


def sparsify_forward(w, cfg, x):
    """sparsify's SparseCoder.forward output: the decoded top latents plus b_dec, plus x @ W_skip.T where it has one."""
    out = sparsify_encode(w, cfg, x) @ w["W_dec"] + w["b_dec"]
    if "W_skip" in w:
        out = out + x @ w["W_skip"].mT
    return out


# -- writing files -------------------------------------------------------------------


def gemma_scope_params(d_in, d_out=None, seed=0, lowercase=False):
    rng = np.random.default_rng(seed)
    d_out = d_in if d_out is None else d_out
    params = {
        "W_enc": rng.standard_normal((d_in, D_SAE), dtype=np.float32) / np.sqrt(d_in),
        "W_dec": rng.standard_normal((D_SAE, d_out), dtype=np.float32) / 8,
        "b_enc": rng.standard_normal(D_SAE, dtype=np.float32) / 4,
        "b_dec": rng.standard_normal(d_out, dtype=np.float32) / 4,
        "threshold": np.abs(rng.standard_normal(D_SAE, dtype=np.float32)) / 2,
    }
    params = {key: value.astype(np.float32) for key, value in params.items()}
    if lowercase:
        params["w_enc"], params["w_dec"] = params.pop("W_enc"), params.pop("W_dec")
    return params


def write_npz(folder, params):
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "params.npz", **params)
    return folder / "params.npz"


def sparsify_folder(root, hookpoint, d_in, *, transcode=False, skip=False, k=8, seed=0, drop=(), cfg_extra=None):
    """A sparsify hookpoint folder as SparseCoder.save_to_disk writes it; its weights and cfg."""
    generator = torch.Generator().manual_seed(seed)
    weights = {
        "encoder.weight": torch.randn(D_SAE, d_in, generator=generator) / d_in**0.5,
        "encoder.bias": torch.randn(D_SAE, generator=generator) / 4,
        "W_dec": torch.randn(D_SAE, d_in, generator=generator) / 8,
        "b_dec": torch.randn(d_in, generator=generator) / 4,
    }
    if skip:
        weights["W_skip"] = torch.randn(d_in, d_in, generator=generator) / (4 * d_in**0.5)
    cfg = {
        "activation": "topk", "expansion_factor": 32, "normalize_decoder": True, "num_latents": D_SAE, "k": k,
        "multi_topk": False, "skip_connection": skip, "transcode": transcode, "d_in": d_in, **(cfg_extra or {}),
    }  # fmt: skip
    folder = root / hookpoint
    folder.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor for name, tensor in weights.items() if name not in drop}, str(folder / "sae.safetensors"))
    (folder / "cfg.json").write_text(json.dumps(cfg))
    return folder, weights, cfg


def as_torch(params):
    return {("W_" + key[2:] if key.startswith("w_") else key): torch.from_numpy(value) for key, value in params.items()}


# -- Gemma Scope -----------------------------------------------------------------------


def test_gemma_scope_sae_encodes_decodes_and_splices_as_gemma_scope_does(tiny_model, tmp_path):
    model = tiny_model("gemma2")
    site = "layers.1.layer_output"
    params = gemma_scope_params(model.hidden_size)
    sae = Dictionary.from_gemma_scope(write_npz(tmp_path, params), reads=site, model=model)
    assert (sae.activation, sae.reads, sae.writes, sae.apply_b_dec_to_input) == ("jumprelu", site, None, False)
    p = as_torch(params)
    x = read(model, PROMPTS, site)
    features = sae.encode(x)
    assert torch.equal(features, gemma_scope_encode(p, x))
    assert 0 < (features > 0).float().mean() < 1  # the threshold zeroes some features and keeps others
    assert torch.equal(sae.decode(features), gemma_scope_decode(p, features))
    assert torch.equal(sae(x), gemma_scope_decode(p, gemma_scope_encode(p, x)))
    # spliced: the model runs on Gemma Scope's reconstruction
    expected = logits_writing(model, PROMPTS, site, site, lambda x: gemma_scope_decode(p, gemma_scope_encode(p, x)))
    torch.testing.assert_close(run_with_dictionary(model, sae, PROMPTS), expected)
    # the folder holding params.npz, and the lowercase w_enc / w_dec of some releases, load the same
    lower = Dictionary.from_gemma_scope(write_npz(tmp_path / "lower", gemma_scope_params(model.hidden_size, lowercase=True)), reads=site)
    assert torch.equal(Dictionary.from_gemma_scope(tmp_path, reads=site).encode(x), features)
    assert torch.equal(lower.encode(x), features)


def test_gemma_scope_transcoder_writes_the_mlp_output(tiny_model, tmp_path):
    model = tiny_model("gemma2")
    reads, writes = "layers.0.mlp_norm_output", "layers.0.mlp.mlp_output"
    params = gemma_scope_params(model.hidden_size, seed=1)
    transcoder = Dictionary.from_gemma_scope(write_npz(tmp_path, params), reads=reads, writes=writes, model=model)
    assert transcoder.is_transcoder and transcoder.architecture == "jumprelu_transcoder"
    p = as_torch(params)
    expected = logits_writing(model, PROMPTS, reads, writes, lambda x: gemma_scope_decode(p, gemma_scope_encode(p, x)))
    torch.testing.assert_close(run_with_dictionary(model, transcoder, PROMPTS), expected)


def test_gemma_scope_malformed_files(tiny_model, tmp_path):
    model = tiny_model("gemma2")
    site = "layers.1.layer_output"
    params = gemma_scope_params(model.hidden_size)
    lacking = {key: value for key, value in params.items() if key != "threshold"}
    with pytest.raises(ValueError, match="lacks threshold"):
        Dictionary.from_gemma_scope(write_npz(tmp_path / "lacking", lacking), reads=site)
    wrong = {**params, "b_dec": params["b_dec"][:-1]}
    with pytest.raises(ValueError, match=r"params\.npz: b_dec is \[63\]"):
        Dictionary.from_gemma_scope(write_npz(tmp_path / "wrong", wrong), reads=site)
    # trained on a model twice as wide: refused against this model's hidden size, naming both
    wide = write_npz(tmp_path / "wide", gemma_scope_params(2 * model.hidden_size))
    with pytest.raises(InvalidArgument, match=f"hidden_size={model.hidden_size} wide on this model, but its d_in is {2 * model.hidden_size}"):
        Dictionary.from_gemma_scope(wide, reads=site, model=model)
    with pytest.raises(InvalidArgument, match="d_in"):  # loaded without the model, it is refused where it runs
        run_with_dictionary(model, Dictionary.from_gemma_scope(wide, reads=site), PROMPTS)
    with pytest.raises(FileNotFoundError, match="params.npz"):
        Dictionary.from_gemma_scope(tmp_path / "nowhere", reads=site)
    scaled = {**params, "scaling_factor": np.full(model.hidden_size, 2.0, dtype=np.float32)}
    with pytest.raises(ValueError, match="scaling_factor"):
        Dictionary.from_gemma_scope(write_npz(tmp_path / "scaled", scaled), reads=site)


# -- sparsify --------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["llama", "mixtral"])
def test_sparsify_sae_at_a_block_hookpoint(tiny_model, tmp_path, family):
    model = tiny_model(family)
    folder, w, cfg = sparsify_folder(tmp_path, "layers.1", model.hidden_size)
    sae = Dictionary.from_sparsify(folder, model)
    site = "layers.1.layer_output"
    assert (sae.reads, sae.writes, sae.activation, sae.k, sae.apply_b_dec_to_input) == (site, None, "topk", 8, True)
    x = read(model, PROMPTS, site)
    features = sae.encode(x)
    torch.testing.assert_close(features, sparsify_encode(w, cfg, x))
    assert ((features > 0).sum(-1) <= cfg["k"]).all() and (features > 0).any()
    torch.testing.assert_close(sae(x), sparsify_forward(w, cfg, x))
    expected = logits_writing(model, PROMPTS, site, site, lambda x: sparsify_forward(w, cfg, x))
    torch.testing.assert_close(run_with_dictionary(model, sae, PROMPTS), expected)
    # the run's folder, with the hookpoint named
    assert torch.equal(Dictionary.from_sparsify(tmp_path, model, hookpoint="layers.1").encode(x), features)


@pytest.mark.parametrize("family", ["llama", "mixtral"])
def test_sparsify_transcoder_with_a_skip_at_an_mlp_hookpoint(tiny_model, tmp_path, family):
    model = tiny_model(family)
    folder, w, cfg = sparsify_folder(tmp_path, "layers.0.mlp", model.hidden_size, transcode=True, skip=True, seed=2)
    transcoder = Dictionary.from_sparsify(folder, model)
    reads, writes = "layers.0.mlp_input", "layers.0.mlp.mlp_output"
    assert (transcoder.reads, transcoder.writes, transcoder.apply_b_dec_to_input) == (reads, writes, False)
    x = read(model, PROMPTS, reads)
    torch.testing.assert_close(transcoder.encode(x), sparsify_encode(w, cfg, x))
    torch.testing.assert_close(transcoder(x), sparsify_forward(w, cfg, x))
    expected = logits_writing(model, PROMPTS, reads, writes, lambda x: sparsify_forward(w, cfg, x))
    torch.testing.assert_close(run_with_dictionary(model, transcoder, PROMPTS), expected)


def test_sparsify_hookpoints_map_to_standard_values(tiny_model):
    llama, gemma2, gpt2 = tiny_model("llama"), tiny_model("gemma2"), tiny_model("gpt2")
    assert sparsify_sites(llama, "layers.2") == ("layers.2.layer_output", None)
    assert sparsify_sites(llama, "layers.2", transcoder=True) == ("layers.2.layer_input", "layers.2.layer_output")
    assert sparsify_sites(llama, "layers.1.mlp") == ("layers.1.mlp.mlp_output", None)
    assert sparsify_sites(llama, "layers.1.self_attn") == ("layers.1.self_attn.attention_output", None)
    assert sparsify_sites(llama, "layers.1.post_attention_layernorm") == ("layers.1.mlp_norm_output", None)
    assert sparsify_sites(gpt2, "h.1") == ("layers.1.layer_output", None)
    assert sparsify_sites(gpt2, "h.1.mlp", transcoder=True) == ("layers.1.mlp_input", "layers.1.mlp.mlp_output")
    # Gemma 2 norms the MLP's output before adding it: the MLP module's own output is no standard value,
    # the norm's is the block's mlp_output
    with pytest.raises(ValueError, match=r"'layers\.1\.mlp' \(Gemma2MLP\): no standard value.*pass reads="):
        sparsify_sites(gemma2, "layers.1.mlp")
    assert sparsify_sites(gemma2, "layers.1.post_feedforward_layernorm") == ("layers.1.mlp.mlp_output", None)
    with pytest.raises(ValueError, match=r"'layers\.9' names no module of LlamaModel"):
        sparsify_sites(llama, "layers.9")


def test_sparsify_malformed_folders(tiny_model, tmp_path):
    model = tiny_model("llama")
    width = model.hidden_size
    folder, _, _ = sparsify_folder(tmp_path / "a", "layers.1", width, drop=("W_dec",))
    with pytest.raises(ValueError, match="lacks W_dec"):
        Dictionary.from_sparsify(folder, model)
    folder, _, _ = sparsify_folder(tmp_path / "b", "layers.1", width, cfg_extra={"activation": "groupmax"})
    with pytest.raises(ValueError, match="groupmax"):
        Dictionary.from_sparsify(folder, model)
    folder, _, _ = sparsify_folder(tmp_path / "c", "layers.1", width, cfg_extra={"d_in": width + 1})
    with pytest.raises(ValueError, match=r"encoder\.weight is \[96, 64\], but cfg\.json says"):
        Dictionary.from_sparsify(folder, model)
    folder, _, _ = sparsify_folder(tmp_path / "d", "layers.1", 2 * width)  # another model's width
    with pytest.raises(InvalidArgument, match=f"hidden_size={width} wide on this model, but its d_in is {2 * width}"):
        Dictionary.from_sparsify(folder, model)
    folder, _, _ = sparsify_folder(tmp_path / "e", "layers.1", width, skip=True)
    with pytest.raises(ValueError, match="skip connection on an autoencoder"):
        Dictionary.from_sparsify(folder, model)
    folder, _, _ = sparsify_folder(tmp_path / "f", "layers.1", width)
    with pytest.raises(ValueError, match="pass the model"):
        Dictionary.from_sparsify(folder)
    assert Dictionary.from_sparsify(folder, reads="layers.0.layer_output").reads == "layers.0.layer_output"
    with pytest.raises(FileNotFoundError, match="pass hookpoint= one of layers.1"):
        Dictionary.from_sparsify(tmp_path / "f", model)
