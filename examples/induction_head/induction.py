"""An induction head, trained on the spot and found with nnterp's toolkit: the code of docs/tutorial-induction-head.md.

A two-layer attention-only Llama (MLPs zeroed and frozen) learns to continue
repeated random words; the toolkit then finds how: the logit lens, the
attention patterns scored per head, activation and attribution patching over
heads, an ablation, and path patching from the previous-token head. Each step
is one function the page shows.

    uv run python examples/induction_head/induction.py    # trains (seconds), prints the findings
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import nnterp  # noqa: F401 - before any transformers.models module
import torch
from nnterp import StandardizedTransformer
from nnterp.toolkit import Sweep, attribution_patching, cache_values, logit_lens, patch_heads, patch_paths
from torch import Tensor
from tqdm.auto import tqdm

#: the vocabulary: forty two-letter words, each one token
WORDS = tuple(c + v for c in "bdgklmst" for v in "aeiou")
#: the repeated half: HALF random words, then the same HALF words again
HALF = 20
#: the sequence the model reads: BOS, then the two halves
LENGTH = 1 + 2 * HALF
#: the positions whose logits predict a word's second occurrence from the one before it, and their first-time twins
SECOND = slice(HALF + 1, 2 * HALF)
FIRST = slice(1, HALF)
CHANCE = math.log(len(WORDS))
SEED = 0


# -- the model -----------------------------------------------------------------------


def build_tokenizer() -> Any:
    """A word-level tokenizer over ``WORDS`` that starts every text with ``<bos>``: ``"ba di"`` is ``[0, 2, 3]``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<bos>": 0, "<unk>": 1, **{word: 2 + i for i, word in enumerate(WORDS)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<bos>", eos_token="<bos>", pad_token="<bos>", unk_token="<unk>")


def build_model(seed: int = SEED) -> Any:
    """A two-layer, four-head, 64-wide Llama whose MLPs add nothing: ``down_proj`` zeroed, every MLP weight frozen."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=2 + len(WORDS), hidden_size=64, intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=0, pad_token_id=0, attn_implementation="eager",
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    for layer in model.model.layers:
        torch.nn.init.zeros_(layer.mlp.down_proj.weight)
        layer.mlp.requires_grad_(False)
    return model


def periodic_batch(count: int, generator: torch.Generator) -> Tensor:
    """Training sequences ``[count, LENGTH]``: BOS, then ``period`` distinct random words repeated, ``period`` drawn per row in 4..HALF.

    The period varies so that no head can predict the repeat from position
    alone (with a fixed period of 20, a head attending 19 tokens back copies
    without reading any content, and no induction head forms).
    """
    words = torch.rand(count, len(WORDS), generator=generator).argsort(-1)[:, :HALF] + 2
    period = torch.randint(4, HALF + 1, (count, 1), generator=generator)
    body = words.gather(1, torch.arange(LENGTH - 1)[None] % period)
    return torch.cat([torch.zeros(count, 1, dtype=torch.long), body], 1)


def head_sparsity(model: Any, inputs: list[Tensor]) -> Tensor:
    """``sum over layers and heads of sqrt(mean |what the head adds to the stream|)``: small when few heads do the work.

    ``inputs`` are the ``o_proj`` inputs of each layer, ``[batch, seq, heads * head_dim]``.
    """
    total = torch.zeros(())
    for layer, joined in zip(model.model.layers, inputs):
        heads = layer.self_attn.config.num_attention_heads
        split = joined.unflatten(-1, (heads, -1))
        weight = layer.self_attn.o_proj.weight.unflatten(-1, (heads, -1))  # [hidden, heads, head_dim]
        added = torch.einsum("bshd,ohd->bsho", split, weight)
        total = total + (added.norm(dim=-1).mean((0, 1)) + 1e-3).sqrt().sum()
    return total


def seen_before(ids: Tensor) -> Tensor:
    """Which next tokens ``ids[:, 1:]`` already occurred in the sequence after BOS, ``[batch, seq - 1]``: the repeats."""
    targets = ids[:, 1:]
    earlier = (targets[:, :, None] == targets[:, None, :]).tril(diagonal=-1)
    return earlier.any(-1)


@dataclass
class Training:
    """What training measured: per step, the loss on each half of a sequence; the seconds it took."""

    first: list[float] = field(default_factory=list)
    second: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train(
    model: Any,
    *,
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 1e-2,
    sparsity: float = 0.2,
    sparsity_from: int = 150,
    seed: int = SEED,
    progress: bool = True,
) -> Training:
    """Train on ``periodic_batch`` with next-token loss plus ``sparsity * head_sparsity``: the losses of each step.

    ``first`` is the loss on a period's first occurrence (chance: nothing
    predicts it), ``second`` on the repeats. The sparsity term, off for the
    first ``sparsity_from`` steps while the copying forms, then ramped in,
    makes the model keep as few heads as do the task: without it every head
    of layer 1 learns to copy, and no single one can be found or ablated.
    Started from step 0 it can shut every head before any has learned.
    """
    generator = torch.Generator().manual_seed(seed)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=0.0)
    inputs: list[Tensor] = []
    hooks = [layer.self_attn.o_proj.register_forward_pre_hook(lambda _, args: inputs.append(args[0])) for layer in model.model.layers]
    log, start = Training(), time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small train several times faster on one thread than on contended cores
    model.train()
    try:
        for step in tqdm(range(steps), desc="training", disable=not progress):
            ids = periodic_batch(batch_size, generator)
            logits = model(ids).logits[:, :-1]
            losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
            repeat = seen_before(ids)
            # no penalty until the copying has formed, then a linear ramp to full strength halfway to the end
            weight = sparsity * min(1.0, max(0.0, 2 * (step - sparsity_from) / max(1, steps - sparsity_from)))
            loss = losses.mean() + weight * head_sparsity(model, inputs)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            inputs.clear()
            log.first.append(losses[~repeat].mean().item())
            log.second.append(losses[repeat].mean().item())
    finally:
        for hook in hooks:
            hook.remove()
        model.eval()
        torch.set_num_threads(threads)
    log.seconds = time.perf_counter() - start
    return log


def train_induction_model(path: str | Path, *, seed: int = SEED, progress: bool = True, **training: Any) -> Training:
    """Build, train and save the model and its tokenizer to ``path`` (``save_pretrained``): what training measured."""
    model = build_model(seed)
    log = train(model, seed=seed, progress=progress, **training)
    model.save_pretrained(path)
    build_tokenizer().save_pretrained(path)
    return log


# -- prompts -------------------------------------------------------------------------


def repeated_prompts(count: int, seed: int = SEED + 1) -> list[str]:
    """``count`` prompts of HALF distinct random words followed by the same HALF words: ``"ba ko ... ba ko ..."``."""
    generator = torch.Generator().manual_seed(seed)
    prompts = []
    for _ in range(count):
        half = [WORDS[i] for i in torch.randperm(len(WORDS), generator=generator)[:HALF]]
        prompts.append(" ".join(half + half))
    return prompts


def corrupt(prompts: list[str], seed: int = SEED + 2) -> list[str]:
    """The same prompts with the first half re-drawn from the words the prompt lacks: the repeat is no longer a repeat."""
    generator = torch.Generator().manual_seed(seed)
    corrupted = []
    for prompt in prompts:
        words = prompt.split()
        others = [word for word in WORDS if word not in words]
        first = [others[i] for i in torch.randperm(len(others), generator=generator)[:HALF]]
        corrupted.append(" ".join(first + words[HALF:]))
    return corrupted


def next_tokens(model: Any, prompts: list[str]) -> Tensor:
    """The ids each position should predict, ``[batch, LENGTH - 1]``: the prompt shifted by one."""
    ids = torch.tensor(model.tokenizer(prompts)["input_ids"])
    if ids.shape[1] != LENGTH:
        raise ValueError(f"the prompts tokenize to {ids.shape[1]} tokens, not {LENGTH}: build them with repeated_prompts")
    return ids[:, 1:]


def repeat_logprob(model: Any, prompts: list[str]) -> Callable[[Tensor], Tensor]:
    """A patching metric: the mean log-probability of each repeated word at its second occurrence (SECOND positions).

    Near 0 when the model copies, near ``-log(len(WORDS))`` when it guesses.
    """
    targets = next_tokens(model, prompts)[:, SECOND]

    def metric(logits: Tensor) -> Tensor:
        logprobs = logits[:, SECOND].float().log_softmax(-1)
        return logprobs.gather(-1, targets[..., None].to(logprobs.device)).mean()

    return metric


# -- the findings --------------------------------------------------------------------


@torch.no_grad()
def position_losses(model: Any, prompts: list[str], edit: Callable[[Any], Any] | None = None, remote: bool | str = False) -> Tensor:
    """The next-token loss at each position, averaged over the prompts, ``[LENGTH - 1]``; ``edit(model)`` runs inside the trace first."""
    targets = next_tokens(model, prompts)
    out: list[Tensor] = []
    with model.trace(prompts, remote=remote):
        if edit is not None:
            edit(model)
        logits = model.logits[:, :-1].float()
        out.append(torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets.to(logits.device), reduction="none").mean(0).cpu())
    return out[0]


def half_losses(losses: Tensor) -> tuple[float, float]:
    """``(first, second)``: the mean loss on the words' first occurrences (FIRST) and on their repeats (SECOND)."""
    return losses[FIRST].mean().item(), losses[SECOND].mean().item()


def zero_head(layer: int, head: int) -> Callable[[Any], None]:
    """An edit that ablates one head: its ``attention_head_outputs`` set to zero at every position."""

    def edit(model: Any) -> None:
        model.layers[layer].self_attn.attention_head_outputs[:, :, head] = 0

    return edit


def attention_patterns(model: Any, prompts: list[str], remote: bool | str = False) -> Tensor:
    """Every layer's ``attention_probabilities`` on ``prompts``, stacked: ``[layers, batch, heads, query, key]``."""
    cache = cache_values(model, prompts, "layers.*.self_attn.attention_probabilities", progress=False, remote=remote)
    return cache["layers.*.self_attn.attention_probabilities"]


def head_scores(patterns: Tensor) -> tuple[Tensor, Tensor]:
    """``(induction, previous)``, each ``[layers, heads]``: the mean attention from a repeat to the word after its first occurrence, and to the previous token.

    ``patterns`` are ``attention_patterns``, ``[layers, batch, heads, query,
    key]``. The induction score averages ``pattern[i, i - HALF + 1]`` over the
    queries of the repeat (i = HALF + 1 ... 2 HALF), the previous-token score
    ``pattern[i, i - 1]`` over every query after the first word.
    """
    induction = patterns.diagonal(offset=-(HALF - 1), dim1=-2, dim2=-1)[..., 2:]  # queries HALF + 1 ...
    previous = patterns.diagonal(offset=-1, dim1=-2, dim2=-1)[..., 1:]  # queries 2 ...
    return induction.mean((1, 3)), previous.mean((1, 3))


def previous_token_paths(
    model: Any, prompts: list[str], corrupted: list[str], metric: Callable[[Tensor], Tensor],
    induction_head: tuple[int, int], *, progress: bool = True, remote: bool | str = False,
) -> dict[str, Sweep]:  # fmt: skip
    """Path patching from every head of layer 0 into one input of the induction head (or the logits): a normalized ``[1, heads]`` Sweep per receiver.

    ``"key"`` sends each head's clean output into the induction head's key
    alone, and so on; ``"other keys"`` into the other layer-1 heads' keys,
    ``"logits"`` straight to the unembedding. Everything else in the
    corrupted run stays as it was.
    """
    layer, head = induction_head
    others = [h for h in range(model.layers[layer].self_attn.num_kv_heads) if h != head]
    receivers = {
        "key": [(layer, "k", head)], "query": [(layer, "q", head)], "value": [(layer, "v", head)],
        "other keys": [(layer, "k", others)], "logits": ["logits"],
    }  # fmt: skip
    return {
        name: patch_paths(model, prompts, corrupted, metric, chosen, layers=[0], progress=progress, remote=remote).normalized()
        for name, chosen in receivers.items()
    }


def top_head(grid: Tensor) -> tuple[int, int]:
    """The ``(layer, head)`` of the largest cell of a ``[layers, heads]`` grid."""
    index = int(grid.nan_to_num(float("-inf")).argmax())
    return divmod(index, grid.shape[1])


def as_sweep(grid: Tensor, site: str) -> Sweep:
    """A ``[layers, heads]`` score grid as a ``Sweep``, so that ``plot_sweep`` draws it."""
    labels = {"layer": [str(i) for i in range(grid.shape[0])], "head": [str(i) for i in range(grid.shape[1])]}
    return Sweep(grid.float(), ("layer", "head"), labels, 1.0, 0.0, site)


@dataclass
class Findings:
    """What the tutorial finds, each step's result kept for the plots and the page."""

    training: Training
    lens: Tensor  # [layers, seq, vocab]: one prompt's logit lens
    lens_repeat: list[float]  # per layer: the mean probability of the right word on the repeat
    patterns: Tensor  # [layers, heads, query, key]: the first prompt's attention patterns
    induction: Tensor
    previous: Tensor
    induction_head: tuple[int, int]
    previous_head: tuple[int, int]
    patching: Sweep
    patching_head: tuple[int, int]
    attribution: Sweep
    attribution_head: tuple[int, int]
    losses: Tensor
    ablated: Tensor
    ablated_previous: Tensor
    control: Tensor
    control_head: tuple[int, int]
    paths: dict[str, Sweep]  # per receiver of the induction head: path patching from each layer-0 head
    prompts: list[str]
    corrupted: list[str]


def find_induction_head(model: Any, prompts: list[str], training: Training, *, progress: bool = True, remote: bool | str = False) -> Findings:
    """Run every step of the tutorial on ``prompts`` (repeated_prompts): the Findings."""
    num_layers = model.num_layers
    # 1. the logit lens: which layer's stream predicts the repeat
    lens = logit_lens(model, prompts[0], remote=remote)[0]  # [layers, seq, vocab]
    targets = next_tokens(model, prompts[:1])[0]
    right = lens[:, :-1].gather(-1, targets[None, :, None].expand(num_layers, -1, 1))[..., 0]  # [layers, seq - 1]
    lens_repeat = right[:, SECOND].mean(-1).tolist()
    # 2. the attention patterns, scored per head
    patterns = attention_patterns(model, prompts, remote=remote)
    induction, previous = head_scores(patterns)
    # 3. activation patching over heads, and its first-order estimate
    corrupted = corrupt(prompts)
    metric = repeat_logprob(model, prompts)
    patching = patch_heads(model, prompts, corrupted, metric, progress=progress, remote=remote).normalized()
    attribution = attribution_patching(model, prompts, corrupted, metric, values="heads", progress=progress, remote=remote).normalized()
    # 4. ablations: the induction head, the previous-token head, and a head that scores low on both, as a control
    found, before = top_head(induction), top_head(previous)
    rest = induction + previous
    for head in (found, before):
        rest[head] = float("inf")
    control = divmod(int(rest.argmin()), rest.shape[1])
    # 5. path patching: through which of the induction head's inputs the previous-token head acts
    paths = previous_token_paths(model, prompts, corrupted, metric, found, progress=progress, remote=remote)
    return Findings(
        training=training, lens=lens, lens_repeat=lens_repeat, patterns=patterns[:, 0], induction=induction, previous=previous,
        induction_head=found, previous_head=before, patching=patching, patching_head=top_head(patching.values),
        attribution=attribution, attribution_head=top_head(attribution.values),
        losses=position_losses(model, prompts, remote=remote),
        ablated=position_losses(model, prompts, zero_head(*found), remote=remote),
        ablated_previous=position_losses(model, prompts, zero_head(*before), remote=remote),
        control=position_losses(model, prompts, zero_head(*control), remote=remote), control_head=control,
        paths=paths, prompts=prompts, corrupted=corrupted,
    )  # fmt: skip


def load(path: str | Path) -> StandardizedTransformer:
    """The saved model through nnterp, with eager attention so that its patterns and per-head outputs are served."""
    return StandardizedTransformer(str(path), attn_implementation="eager")


def run(path: str | Path | None = None, *, prompts: int = 8, progress: bool = True) -> tuple[StandardizedTransformer, Findings]:
    """Train (into ``path``, a temporary folder by default), load with nnterp and find the induction head."""
    path = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix="induction-"))
    training = train_induction_model(path, progress=progress)
    model = load(path)
    return model, find_induction_head(model, repeated_prompts(prompts), training, progress=progress)


# -- the figures ---------------------------------------------------------------------


def _lines(curves: dict[str, list[float]], xlabel: str, ylabel: str, title: str, path: Path, xticks: list[str] | None = None) -> Path:
    """A line plot of named curves with the chance loss dashed, written as a PNG."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 3.2), dpi=80, layout="constrained")
    axes = figure.add_subplot()
    for index, (name, values) in enumerate(curves.items()):
        axes.plot(values, label=name, linewidth=3 if index == 0 else 1.5)
    axes.axhline(CHANCE, color="grey", linestyle="--", label=f"chance (log {len(WORDS)})")
    if xticks is not None:
        axes.set_xticks(range(len(xticks)), xticks, rotation=90, fontsize="small")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize="small")
    figure.savefig(path, format="png")
    return path


def draw(model: Any, findings: Findings, folder: str | Path) -> list[Path]:
    """Every figure of the page, written as PNGs into ``folder``: their paths."""
    from nnterp.toolkit import plot_attention, plot_logit_lens, plot_sweep

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokens = model.tokenizer.convert_ids_to_tokens(model.tokenizer(findings.prompts[0])["input_ids"])
    (li, hi), (lp, hp) = findings.induction_head, findings.previous_head
    f = findings
    paths = [
        _lines({"first occurrence": f.training.first, "repeat": f.training.second}, "step", "loss", "training", folder / "training.png"),
        plot_logit_lens(f.lens, tokens, folder / "lens.png", tokenizer=model.tokenizer, figsize=(18, 2.4), dpi=80),
        plot_sweep(as_sweep(f.induction, "induction score"), folder / "induction-scores.png", title="induction score", figsize=(4, 2.4), dpi=80),
        plot_sweep(as_sweep(f.previous, "previous-token score"), folder / "previous-scores.png", title="previous-token score", figsize=(4, 2.4), dpi=80),
        plot_attention(f.patterns[li, hi], tokens, folder / "induction-pattern.png", title=f"layer {li} head {hi}", figsize=(8, 7), dpi=80),
        plot_attention(f.patterns[lp, hp], tokens, folder / "previous-pattern.png", title=f"layer {lp} head {hp}", figsize=(8, 7), dpi=80),
        plot_sweep(f.patching, folder / "patching.png", title="patch_heads (normalized)", figsize=(4, 2.4), dpi=80),
    ]
    paths.append(plot_sweep(f.attribution, folder / "attribution.png", title="attribution_patching (normalized)", figsize=(4, 2.4), dpi=80))
    curves = {
        "clean": f.losses.tolist(),
        f"layer {li} head {hi} zeroed": f.ablated.tolist(),
        f"layer {lp} head {hp} zeroed": f.ablated_previous.tolist(),
        f"layer {f.control_head[0]} head {f.control_head[1]} zeroed (control)": f.control.tolist(),
    }
    paths.append(_lines(curves, "position (predicting the next token)", "loss", "ablations", folder / "ablation.png", xticks=tokens[:-1]))
    return paths


def summary(findings: Findings) -> dict[str, Any]:
    """The findings as plain numbers, for the page and for printing."""
    f = findings
    halves = {name: half_losses(getattr(f, name)) for name in ("losses", "ablated", "ablated_previous", "control")}
    return {
        "training_seconds": round(f.training.seconds, 1),
        "steps": len(f.training.first),
        "chance": round(CHANCE, 2),
        "first_half_loss": round(halves["losses"][0], 3),
        "second_half_loss": round(halves["losses"][1], 3),
        "lens_repeat": [round(p, 3) for p in f.lens_repeat],
        "induction_head": list(f.induction_head),
        "induction_score": round(float(f.induction[f.induction_head]), 3),
        "previous_head": list(f.previous_head),
        "previous_score": round(float(f.previous[f.previous_head]), 3),
        "patching_head": list(f.patching_head),
        "patching_restored": round(float(f.patching.values[f.patching_head]), 3),
        "attribution_head": list(f.attribution_head),
        "attribution_estimate": round(float(f.attribution.values[f.attribution_head]), 3),
        "ablated_second_half_loss": round(halves["ablated"][1], 3),
        "ablated_previous_second_half_loss": round(halves["ablated_previous"][1], 3),
        "control_head": list(f.control_head),
        "control_second_half_loss": round(halves["control"][1], 3),
        "previous_patching": round(float(f.patching.values[f.previous_head]), 3),
        # (+ 0.0: a -0.0 prints as 0.0)
        **{f"path_{name.replace(' ', '_')}": round(float(sweep.values[0, f.previous_head[1]]), 3) + 0.0 for name, sweep in f.paths.items()},
    }


if __name__ == "__main__":
    import json

    model, findings = run()
    print(json.dumps(summary(findings), indent=1))
