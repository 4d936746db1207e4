"""The result record every check returns, its statuses and the byte units of its details."""

from __future__ import annotations

from typing import Any

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
ORDER = {FAIL: 0, WARN: 1, SKIP: 2, PASS: 3}
GIB = 1024**3
MIB = 1024**2


def result(check: str, host: str, subject: str, status: str, detail: str, fix: str = "") -> dict[str, Any]:
    """One check's result; ``status`` is one of ``pass``, ``warn``, ``fail``, ``skip``."""
    if status not in ORDER:
        raise ValueError(f"unknown status {status!r}")
    return {"check": check, "host": host, "subject": subject, "status": status, "detail": detail, "fix": fix}


def gib(n: float | None) -> str:
    """Bytes as GiB, or MiB below one GiB; ``?`` when unknown."""
    if n is None:
        return "?"
    return f"{n / GIB:.1f} GiB" if abs(n) >= GIB or n == 0 else f"{n / MIB:.1f} MiB"
