"""Plain-text and Markdown tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return str(value).replace("\n", " ")


def render_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    markdown: bool = False,
    align: str | None = None,
) -> str:
    """A table with one column per header.

    ``align`` has one letter per column, ``l`` or ``r`` (default: left). Plain tables pad
    columns with spaces and underline the header; Markdown tables use pipes (and pad too,
    so they read well as text).
    """
    width = len(headers)
    cells = [[_cell(v) for v in row] for row in rows]
    for row in cells:
        if len(row) != width:
            raise ValueError(f"row has {len(row)} cells, the table has {width} columns: {row!r}")
    align = (align or "l" * width).ljust(width, "l")
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def fmt(row: Sequence[str]) -> list[str]:
        return [v.rjust(w) if a == "r" else v.ljust(w) for v, w, a in zip(row, widths, align, strict=True)]

    if markdown:
        rule = [
            ("-" * max(w - 1, 1) + ":") if a == "r" else "-" * w for w, a in zip(widths, align, strict=True)
        ]
        lines = ["| " + " | ".join(fmt(list(headers))) + " |", "| " + " | ".join(rule) + " |"]
        lines += ["| " + " | ".join(fmt(r)) + " |" for r in cells]
    else:
        lines = ["  ".join(fmt(list(headers))).rstrip(), "  ".join("-" * w for w in widths)]
        lines += ["  ".join(fmt(r)).rstrip() for r in cells]
    return "\n".join(lines)
