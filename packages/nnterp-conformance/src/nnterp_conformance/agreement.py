"""Two loadings of one checkpoint compared value by value: every standard value of every block, written values' effects, the toolkit.

The tensor-parallel and the offloaded runs of the kit both compare their model
with the same checkpoint loaded whole on one device, through ``agreement``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: how closely the two loadings' values must match: float32 sums in another order (a sharded matmul)
ATOL = 1e-5


def _walk(node: Any, name: str) -> Any:
    for part in name.split("."):
        node = getattr(node, part)
    return node


def _same(whole: Any, other: Any, label: str) -> str | None:
    """None when the two agree, else what differs."""
    import torch

    if whole is None and other is None:
        return None
    if not isinstance(whole, torch.Tensor) or not isinstance(other, torch.Tensor):
        return f"a {type(whole).__name__} on one device, a {type(other).__name__} {label}"
    if whole.shape != other.shape:
        return f"shape {tuple(other.shape)} {label}, {tuple(whole.shape)} on one device"
    other = other.float().to(whole.device)
    if not torch.allclose(whole.float(), other, atol=ATOL):
        return f"differs by up to {(whole.float() - other).abs().max().item():.3g}"
    return None


def agreement(whole: Any, other: Any, prompts: list[str], label: str) -> list[tuple[str, str | None]]:
    """``(what, None or how it differs)`` for every comparison of ``other`` with ``whole``, the same checkpoint on one device.

    ``label`` says how ``other`` was loaded (``sharded``, ``offloaded``) in
    the rows: ``"... moves the sharded logits"``, ``"raised offloaded: ..."``.
    """
    from nnterp.toolkit import cache_values, logit_lens

    import torch

    rows: list[tuple[str, str | None]] = []

    def compare(what: str, read: Callable[[Any], Any]) -> None:
        values = []
        for model in (whole, other):
            try:
                values.append(read(model))
            except Exception as error:  # noqa: BLE001 - the row says what raised
                values.append(f"{type(error).__name__}: {error}")
        if isinstance(values[1], str) and not isinstance(values[0], str):
            rows.append((what, f"raised {label}: {values[1][:300]}"))
        elif isinstance(values[0], str):
            rows.append((what, f"raised on one device: {values[0][:300]}"))
        else:
            rows.append((what, _same(values[0], values[1], label)))

    def traced(reader: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def read(model: Any) -> Any:
            with torch.no_grad(), model.trace(prompts):
                value = reader(model).save()
            return value

        return read

    compare("logits", traced(lambda model: model.logits))
    for layer in range(whole.num_layers):
        for name, reason in whole.support(layer=layer).items():
            if reason is None:

                def value(model: Any, name: str = name, layer: int = layer) -> Any:
                    return _walk(model.layers[layer], name)

                compare(f"layers[{layer}].{name}", traced(value))
    plain = traced(lambda model: model.logits)(other)
    for what, edit in _edits(whole):
        compare(what, traced(edit))
        # an edit that does not reach the model would agree too
        moved = not torch.allclose(traced(edit)(other), plain, atol=ATOL)
        rows.append((f"{what} moves the {label} logits", None if moved else "the logits did not change"))
    compare(
        "project_on_vocab(layers[0].layer_output)",
        traced(lambda model: model.project_on_vocab(model.layers[0].layer_output)),
    )
    compare("logit_lens", lambda model: logit_lens(model, prompts))
    names = ["layers.*.layer_output", "logits"]
    if whole.support(layer=whole.num_layers - 1).get("self_attn.attention_probabilities", "missing") is None:
        names.append("layers.-1.self_attn.attention_probabilities")
    for name in names:

        def cached(model: Any, name: str = name) -> Any:
            return cache_values(model, prompts, names, progress=False)[name]

        compare(f"cache_values {name}", cached)
    return rows


def _edits(model: Any) -> list[tuple[str, Callable[[Any], Any]]]:
    """Writes to compare by the logits they lead to: in place, by assignment, on every block kind the model has."""
    support = model.support(layer=model.num_layers - 1)
    last = model.num_layers - 1
    edits: list[tuple[str, Callable[[Any], Any]]] = []

    def pattern(model: Any) -> Any:
        probabilities = model.layers[last].self_attn.attention_probabilities
        probabilities[:, 0] = 0  # one head silenced in place
        return model.logits

    def queries(model: Any) -> Any:
        attention = model.layers[last].self_attn
        attention.attention_queries = attention.attention_queries * 2
        return model.logits

    def expert_outputs(model: Any) -> Any:
        mlp = model.layers[last].mlp
        mlp.expert_outputs = mlp.expert_outputs * 0.5
        return model.logits

    if support.get("self_attn.attention_probabilities", "missing") is None:
        edits.append(("logits after layers[-1].self_attn.attention_probabilities[:, 0] = 0", pattern))
    if support.get("self_attn.attention_queries", "missing") is None:
        edits.append(("logits after layers[-1].self_attn.attention_queries *= 2 (assigned)", queries))
    if support.get("mlp.expert_outputs", "missing") is None:
        edits.append(("logits after layers[-1].mlp.expert_outputs *= 0.5 (assigned)", expert_outputs))
    return edits


def record(whole: Any, other: Any, label: str, only: list[str] | None = None) -> dict:
    """The checks' verdicts on ``other`` and its ``agreement`` with ``whole``, with the count of failures (JSON-ready)."""
    from .runner import PROMPTS, run

    verdicts = run(other, only=only)
    rows = agreement(whole, other, PROMPTS, label)
    failed = sum(verdict.status == "fail" for verdict in verdicts) + sum(problem is not None for _, problem in rows)
    return {
        "checks": {verdict.name: {"status": verdict.status, "detail": verdict.detail} for verdict in verdicts},
        "agreement": dict(rows),
        "failed": failed,
    }


def record_lines(title: str, found: dict) -> list[str]:
    """A ``record`` as the command line prints it: the checks, then each comparison, then the failures."""
    lines = [title, "checks:"]
    lines += [
        f"  {verdict['status'].upper():4}  {name}: {verdict['detail']}" for name, verdict in found["checks"].items()
    ]
    lines.append("agreement with one device:")
    for what, problem in found["agreement"].items():
        lines.append(f"  {'same' if problem is None else 'DIFFERS'}  {what}{'' if problem is None else ': ' + problem}")
    lines.append(f"{found['failed']} failed")
    return lines
