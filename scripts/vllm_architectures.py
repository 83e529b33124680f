"""Write docs/vllm-architectures.md: every text-generation architecture vLLM builds, and whether a vLLM family serves it.

    .vllm/bin/python scripts/vllm_architectures.py           # writes the page
    .vllm/bin/python scripts/vllm_architectures.py --check   # fails where the page is not what this writes

Run by vLLM's environment (``scripts/vllm_env.py build``). An architecture
(vLLM's class name, which is transformers' ``architectures`` entry) is served
where a family of ``nnterp.vllm.families`` lists a model type transformers
builds with that class; otherwise the page says why: whether a transformers
family serves it (then only vLLM's module tree is unmapped), or none does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nnterp  # noqa: F401 - nnsight before transformers.models

from generated import write_or_check

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "vllm-architectures.md"
UNMAPPED = "no vLLM family yet; under transformers the {family} family serves it (`StandardizedTransformer`)"
NO_FAMILY = "no vLLM family yet, and no transformers family either"


def render() -> str:
    import vllm
    from vllm.model_executor.models.registry import _TEXT_GENERATION_MODELS

    from nnterp.registry import family_of_classes, mapped_classes
    from nnterp.vllm.families import FAMILIES

    served = {cls: family.name for family in FAMILIES.values() for model_type in family.model_types for cls in mapped_classes(model_type)}
    rows = []
    for architecture in sorted(_TEXT_GENERATION_MODELS):
        if architecture in served:
            rows.append(f"| `{architecture}` | served: `{served[architecture]}` |")
            continue
        found = family_of_classes([architecture])
        family = found[0] if found is not None else None
        reason = UNMAPPED.format(family=family.name) if family is not None else NO_FAMILY
        rows.append(f"| `{architecture}` | {reason} |")
    count = sum("| served" in row for row in rows)
    return "\n".join(
        [
            "# vLLM architectures",
            "",
            "<!-- written by scripts/vllm_architectures.py in vLLM's environment; do not edit -->",
            "",
            f"Every text-generation architecture vLLM {vllm.__version__} builds, and the vLLM family serving it",
            f"(`nnterp.vllm.families`, proven by `tests/test_vllm.py`): {count} of {len(rows)} served. An architecture",
            "no vLLM family serves loads with `StandardizedTransformer` where a transformers family serves it.",
            "",
            "| architecture | on vLLM |",
            "|---|---|",
            *rows,
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(write_or_check(PAGE, render(), "vllm_architectures.py (with .vllm/bin/python)"))
