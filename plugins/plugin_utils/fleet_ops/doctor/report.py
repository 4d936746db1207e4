"""The doctor's report: counts per status and the table a person reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..textable import render_table
from .results import FAIL, ORDER, PASS, SKIP, WARN


def summary(results: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    counts = {PASS: 0, WARN: 0, FAIL: 0, SKIP: 0}
    for r in results:
        counts[r["status"]] += 1
    return {**counts, "ok": counts[FAIL] == 0}


def render(results: list[Mapping[str, Any]]) -> str:
    """The table a person reads: one line per check, the fix under every failure and warning."""
    rows = sorted(results, key=lambda r: (r["host"], ORDER[r["status"]], r["check"]))
    headers = ["STATUS", "HOST", "CHECK", "SUBJECT", "DETAIL"]
    table = render_table(
        headers, [[r["status"].upper(), r["host"], r["check"], r["subject"], r["detail"]] for r in rows]
    )
    lines = table.splitlines()
    out = lines[:2]
    for row, line in zip(rows, lines[2:], strict=True):
        out.append(line)
        if row["fix"] and row["status"] in (FAIL, WARN):
            out.append(f"      fix: {row['fix']}")
    s = summary(results)
    out.append("")
    out.append(f"{s[FAIL]} failed, {s[WARN]} warnings, {s[PASS]} passed, {s[SKIP]} skipped")
    return "\n".join(out)
