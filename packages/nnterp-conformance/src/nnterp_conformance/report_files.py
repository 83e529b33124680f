"""The families report's files: docs/families.{json,md} written or checked, and the README's headline line kept to the count."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .report_records import PASS, weak_passes
from .report_render import render_json, render_markdown

HEADLINE = re.compile(r"<!-- families -->.*?<!-- /families -->", re.S)


def headline(records: list[dict[str, Any]]) -> str:
    """The README's headline line, between its markers: how many model types pass the whole kit, and how many fully."""
    passing = sum(entry["status"] == PASS for entry in records)
    weak = len(weak_passes(records))
    return (
        f"<!-- families -->**{passing} model types pass the whole kit**, {passing - weak} of them with every block's stream "
        f"the sum of its named terms ([the families table](docs/families.md))<!-- /families -->"
    )


def with_headline(readme: str, records: list[dict[str, Any]]) -> str:
    """``readme`` with its headline line replaced by the current one."""
    return HEADLINE.sub(headline(records), readme)


def write(records: list[dict[str, Any]], directory: Path, readme: Path | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "families.json").write_text(render_json(records))
    (directory / "families.md").write_text(render_markdown(records))
    if readme is not None and readme.exists():
        readme.write_text(with_headline(readme.read_text(), records))


def stale(records: list[dict[str, Any]], directory: Path) -> list[str]:
    """The committed report files that differ from what ``records`` render to."""
    rendered = {"families.json": render_json(records), "families.md": render_markdown(records)}
    return [
        name
        for name, text in rendered.items()
        if not (directory / name).exists() or (directory / name).read_text() != text
    ]
