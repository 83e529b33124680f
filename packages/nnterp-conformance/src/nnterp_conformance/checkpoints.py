"""Tiny checkpoints written locally: a shrunk config, weights from a fixed seed, a tokenizer made on the spot.

No hub is needed. ``tiny_checkpoint(name)`` writes a checkpoint once into a
cache folder (``$NNTERP_CHECKPOINTS``, else ``~/.cache/nnterp/checkpoints``)
with ``save_pretrained`` and returns its directory, which
``StandardizedTransformer(path)`` loads through the real loading path. The
same name gives the same bytes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

SEED = 0
#: every trainable parameter moves by this much noise after the model's own init, so that a norm
#: initialized to ones or a multiplier initialized to one cannot hide a value read off by it; a frozen
#: one (RoFormer's sinusoidal table) keeps the value the model defines it to have
NOISE = 0.05
#: the buffers (or frozen parameters) training sets that the arithmetic reads: a router's selection bias, left at zero,
#: would never move a choice; Gemma 4's layer_scalar, left at one, would hide a rescaling term read off by it
TRAINED_BUFFERS = ("e_score_correction_bias", "expert_bias", "layer_scalar")
NOISED = "trainable parameters and " + ", ".join(TRAINED_BUFFERS)
#: the text the byte-level BPE tokenizer is trained on: fixed, so it trains the same every time
CORPUS = (
    "The quick brown fox jumps over the lazy dog. Hello world, hello there! "
    "The Eiffel Tower is in Paris; the Colosseum is in Rome. 0123456789 "
    "def add(a, b):\n    return a + b\n"
    "Interpretability studies the residual stream, attention patterns and neurons."
)
#: tokens the tokenizer holds: the 256 bytes, one special token, the rest merges
TOKENIZER_VOCAB = 300
SPECIAL = "<|endoftext|>"


def cache_root() -> Path:
    """Where tiny checkpoints are written: ``$NNTERP_CHECKPOINTS``, else ``~/.cache/nnterp/checkpoints``."""
    override = os.environ.get("NNTERP_CHECKPOINTS")
    return Path(override) if override else Path.home() / ".cache" / "nnterp" / "checkpoints"


def spec(name: str) -> Any:
    """The ``TinyConfig`` registered under ``name`` (entry-point group ``nnterp.checkpoints``)."""
    from nnterp.registry import checkpoint

    return checkpoint(name)


def names() -> list[str]:
    """Every registered tiny checkpoint's name, sorted."""
    from nnterp.registry import checkpoint_names

    return checkpoint_names()


def registered(name: str) -> bool:
    """Whether ``name`` is a registered tiny checkpoint (found without importing any other family)."""
    from nnterp.registry import is_checkpoint

    return is_checkpoint(name)


def _digest(tiny: Any) -> str:
    import inspect

    import transformers

    # the code that builds and saves it too: a TinyConfig subclass's build or processor changes the checkpoint
    writers = [
        inspect.getsource(cls)
        for cls in type(tiny).__mro__
        if cls.__module__.split(".")[0] not in ("builtins", "nnterp")
    ]
    text = repr(
        (
            tiny.config().to_json_string(),
            sorted(tiny.load.items()),
            transformers.__version__,
            CORPUS,
            SEED,
            NOISE,
            NOISED,
        )
    )
    if writers:
        text += repr(writers)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def tiny_checkpoint(name: str) -> Path:
    """The directory of the tiny checkpoint ``name``, written on first use.

    Written into a temporary folder beside the cache entry and renamed into
    place, so concurrent workers never see half a checkpoint.
    """
    return checkpoint_for(name, spec(name))


def checkpoint_for(name: str, tiny: Any) -> Path:
    """The directory of the checkpoint ``tiny`` (a ``TinyConfig``) under the cache name ``name``, written on first use.

    What ``tiny_checkpoint`` does for a checkpoint no catalog lists (a vLLM family's, ``nnterp.vllm.families``).
    """
    import nnterp  # noqa: F401 - nnsight before transformers.models, in every process

    target = cache_root() / f"{name}-{_digest(tiny)}"
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        write_checkpoint(tiny, scratch)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def write_checkpoint(tiny: Any, directory: Path) -> None:
    """Write ``tiny``'s model (its own init from ``SEED``, then ``NOISE`` on every parameter and trained buffer) and a tokenizer into ``directory``."""
    import torch
    from transformers import AutoModelForCausalLM

    config = tiny.config()
    tokenizer = build_tokenizer()
    if getattr(config, "vocab_size", TOKENIZER_VOCAB) < len(tokenizer):
        raise ValueError(
            f"{tiny.model_type}: vocab_size {config.vocab_size} is smaller than the tokenizer's {len(tokenizer)}"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        # a checkpoint that is not a causal LM (a vision-language wrapper) builds its own class
        build = getattr(tiny, "build", None)
        model = build(config) if build is not None else AutoModelForCausalLM.from_config(config, **tiny.load)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if parameter.is_floating_point() and (parameter.requires_grad or name.endswith(TRAINED_BUFFERS)):
                    parameter.add_(torch.randn_like(parameter) * NOISE)
            for name, buffer in model.named_buffers():
                if name.endswith(TRAINED_BUFFERS) and buffer.is_floating_point():
                    buffer.add_(torch.randn_like(buffer) * NOISE)
    model.eval()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    # and saves what else it is loaded with (a processor: the tokenizer with an image token, an image processor)
    extra = getattr(tiny, "save_preprocessors", None)
    if extra is not None:
        extra(directory, tokenizer, config)


def build_tokenizer() -> Any:
    """A byte-level BPE tokenizer trained on ``CORPUS``: every text encodes, and the merges are fixed."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB,
        special_tokens=[SPECIAL],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([CORPUS] * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=SPECIAL, bos_token=SPECIAL, pad_token=SPECIAL)
