"""Caches keyed by the planner's input objects (model config, quantization, release) plus plain values.

Those objects are immutable once made, so a result computed for them can be reused for the next plan that
passes the same objects. An entry is keyed by the objects' id() and keeps the objects themselves: while it
exists they stay alive, so no other object can have their ids, and a key that matches is the very same
objects (Python reuses the id of an object only once it is gone).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """At most ``limit`` values, each for (the identity of some objects, some hashable values); emptied
    when full (a plan run asks for few distinct entries, so an LRU would buy nothing)."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int) -> None:
        self._entries: dict[tuple[tuple[int, ...], Hashable], tuple[tuple[Any, ...], V]] = {}
        self._limit = limit

    def get(self, objects: tuple[Any, ...], values: Hashable) -> V | None:
        hit = self._entries.get((tuple(map(id, objects)), values))
        return None if hit is None else hit[1]

    def put(self, objects: tuple[Any, ...], values: Hashable, value: V) -> V:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[tuple(map(id, objects)), values] = (objects, value)  # the objects pin their ids
        return value

    def full(self) -> bool:
        return len(self._entries) >= self._limit
