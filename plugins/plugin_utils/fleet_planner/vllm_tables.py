"""vLLM's per-release tables (data/*.json, derived from the released wheels; data/SOURCES.md says how)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from .versions import Version, parse_version

_DATA = Path(__file__).resolve().parent / "data"


@cache
def table(name: str) -> dict[str, Any]:
    with open(_DATA / f"{name}.json", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def newest_read() -> Version:
    """The newest release whose sources the tables were derived from."""
    return parse_version(table("architectures")["newest"])


def value_at(history: list[list[Any]], v: Version) -> Any:
    """The value of a [[first release, value], ...] history at release ``v`` (None before the first)."""
    out = None
    for first, value in history:
        if parse_version(first) <= v:
            out = value
    return out
