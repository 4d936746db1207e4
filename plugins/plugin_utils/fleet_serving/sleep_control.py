"""Sleeping models (#28): what the host's sleep controller (roles/vllm_server/files/vllm_fleet_sleepd.py)
decides - which awake models go to sleep to make room for one to wake, and which have been idle too long.

Exports:
  make_room(models, wake, budget) -> Room
      the least recently used awake models to sleep so that ``wake`` fits ``budget`` bytes awake; never a
      model with requests in flight (``fits`` is False while only such models could make room)
  over_budget(models, budget) -> list[str]
      the awake models to sleep, least recently used first, until the awake set fits ``budget`` (vLLMs start
      awake, and a restarted one comes back awake)
  idle(models, now, idle_seconds) -> list[str]
      the awake models without requests for ``idle_seconds``
  controller_config(models, budget, idle_seconds, ...) -> dict
      the controller's JSON configuration, checked

Standard library only and no imports from the collection: the controller runs in the vLLM image with this
file mounted beside it (no new image, nothing installed on hosts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LEVELS = (1, 2)


@dataclass(frozen=True)
class Model:
    """One sleep-enabled model as the controller sees it at a decision."""

    name: str
    bytes: int  # GPU bytes it takes awake beyond what it keeps asleep (the plan's, as if alone)
    awake: bool
    in_flight: int = 0  # requests being served (or held for it)
    last_used: float = 0.0  # monotonic time of its last request


@dataclass(frozen=True)
class Room:
    sleep: tuple[str, ...]  # the models to put to sleep first, least recently used first
    fits: bool  # whether the wake fits the budget once they sleep
    awake_bytes: int  # the awake set's bytes once they sleep and the model wakes


def make_room(models: Sequence[Model], wake: str, budget: int) -> Room:
    """The models to sleep before ``wake`` wakes so that the awake set stays within ``budget`` bytes.

    Least recently used first, skipping models with requests in flight (sleeping one would fail them).
    A model bigger than the whole budget alone may still wake once everything else sleeps: refusing it
    forever would fail every request to it, and the plan's awake check is what keeps that from happening.
    """
    by_name = {m.name: m for m in models}
    if wake not in by_name:
        raise KeyError(wake)
    target = by_name[wake]
    others = [m for m in models if m.awake and m.name != wake]
    need = sum(m.bytes for m in others) + target.bytes
    chosen: list[str] = []
    for m in sorted(others, key=lambda m: (m.last_used, m.name)):
        if need <= budget:
            break
        if m.in_flight:
            continue
        chosen.append(m.name)
        need -= m.bytes
    fits = need <= budget or not [m for m in others if m.name not in chosen]
    return Room(sleep=tuple(chosen) if fits else (), fits=fits, awake_bytes=need)


def over_budget(models: Sequence[Model], budget: int) -> list[str]:
    """The awake models without requests in flight to sleep, least recently used first, until the awake set
    fits ``budget`` (or only busy ones are left)."""
    need = sum(m.bytes for m in models if m.awake)
    chosen = []
    for m in sorted((m for m in models if m.awake), key=lambda m: (m.last_used, m.name)):
        if need <= budget:
            break
        if not m.in_flight:
            chosen.append(m.name)
            need -= m.bytes
    return chosen


def idle(models: Sequence[Model], now: float, idle_seconds: float) -> list[str]:
    """The awake models with nothing in flight and no request for ``idle_seconds`` (0: never idle out)."""
    if idle_seconds <= 0:
        return []
    return sorted(m.name for m in models if m.awake and not m.in_flight and now - m.last_used >= idle_seconds)


def controller_config(
    models: Sequence[Mapping[str, Any]],
    budget: int,
    idle_seconds: float,
    *,
    listen: str = "0.0.0.0",
    port: int = 0,
    api_key: str = "",
    wake_timeout: float = 600.0,
) -> dict[str, Any]:
    """The controller's configuration: ``models`` each ``{name, backend, level, bytes}`` and optionally
    ``port`` (a port of its own; requests to the shared ``port`` go by their JSON body's ``model``)."""
    out = []
    names: set[str] = set()
    for m in models:
        name = str(m.get("name") or "")
        if not name or name in names:
            raise ValueError(f"sleep controller: model name {name!r} is empty or repeated")
        names.add(name)
        level = m.get("level")
        if isinstance(level, bool) or level not in LEVELS:
            raise ValueError(f"sleep controller: {name}: level must be 1 or 2, got {level!r}")
        size = m.get("bytes")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"sleep controller: {name}: bytes must be a whole number >= 0, got {size!r}")
        backend = str(m.get("backend") or "")
        if not backend.startswith(("http://", "https://")):
            raise ValueError(f"sleep controller: {name}: backend must be an http(s) URL, got {backend!r}")
        entry = {"name": name, "backend": backend.rstrip("/"), "level": level, "bytes": size}
        if m.get("port"):
            entry["port"] = int(m["port"])
        out.append(entry)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"sleep controller: budget must be a whole number of bytes > 0, got {budget!r}")
    if idle_seconds < 0 or wake_timeout <= 0:
        raise ValueError("sleep controller: idle_seconds must be >= 0 and wake_timeout > 0")
    return {
        "listen": listen,
        "port": int(port),
        "api_key": api_key,
        "budget_bytes": budget,
        "idle_seconds": float(idle_seconds),
        "wake_timeout": float(wake_timeout),
        "models": out,
    }
