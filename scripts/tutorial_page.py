"""Write docs/tutorial-induction-head.md and its figures from examples/induction_head/induction.py.

    uv run python scripts/tutorial_page.py [--check]

Without ``--check`` it trains the tutorial's model (seconds), runs every step, draws the PNGs under
docs/img/induction-head/ with the module's ``draw`` (the code tests/test_tutorial_induction.py runs), keeps the
measured numbers in findings.json beside them, and writes the page: its code blocks are the module's own functions,
read with ``inspect``, never typed. ``--check`` trains nothing: it renders the page again from the current module
and the kept numbers, and exits non-zero when the page is stale or a figure it shows is missing.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path

import nnterp  # noqa: F401 - before any transformers.models module

from generated import write_or_check

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "examples" / "induction_head" / "induction.py"
PAGE = ROOT / "docs" / "tutorial-induction-head.md"
IMAGES = ROOT / "docs" / "img" / "induction-head"
FINDINGS = IMAGES / "findings.json"


def load_tutorial():
    """The tutorial's module, loaded from its file (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location("induction_tutorial", MODULE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def code(module, *names: str) -> str:
    """The source of the module's named functions, as one block shown on the page (not run by the docs test)."""
    return "```python fragment\n" + "\n\n".join(inspect.getsource(getattr(module, name)).rstrip() for name in names) + "\n```"


TEMPLATE = ROOT / "scripts" / "tutorial_page.md.in"


def render(module, numbers: dict) -> str:
    """The page: the template with the measured numbers (``{name}``), then the module's code (``{{code: f, g}}``) filled in."""
    head = lambda key: "layer {} head {}".format(*numbers[key]) if numbers[key] is not None else "(not run)"  # noqa: E731
    values = {**numbers, **{f"{key}_name": head(key) for key in ("induction_head", "previous_head", "patching_head", "attribution_head", "control_head")}}
    values["lens_first"], values["lens_last"] = numbers["lens_repeat"][0], numbers["lens_repeat"][-1]
    values["ablation_factor"] = round(numbers["ablated_second_half_loss"] / numbers["second_half_loss"])
    text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})", lambda match: str(values[match.group(1)]), TEMPLATE.read_text())
    return re.sub(r"\{\{code: ([\w, ]+)\}\}", lambda match: code(module, *[n.strip() for n in match.group(1).split(",")]), text)


def main() -> int:
    module = load_tutorial()
    if "--check" not in sys.argv:
        model, findings = module.run()
        IMAGES.mkdir(parents=True, exist_ok=True)
        for stale in IMAGES.glob("*.png"):
            stale.unlink()
        module.draw(model, findings, IMAGES)
        FINDINGS.write_text(json.dumps(module.summary(findings), indent=1) + "\n")
    numbers = json.loads(FINDINGS.read_text())
    text = render(module, numbers)
    missing = [name for name in re.findall(r"\(img/induction-head/([\w.-]+)\)", text) if not (IMAGES / name).exists()]
    if missing:
        print(f"the page shows figures that are not there: {missing}; run uv run python scripts/tutorial_page.py")
        return 1
    return write_or_check(PAGE, text, "tutorial_page.py")


if __name__ == "__main__":
    sys.exit(main())
