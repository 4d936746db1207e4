"""The planner's caches keyed by its input objects: a value is found only for the very same objects."""

from __future__ import annotations

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.identity_cache import (
    IdentityCache,
)


def test_found_for_the_same_objects_and_values_only() -> None:
    cache: IdentityCache[str] = IdentityCache(8)
    config = {"hidden_size": 4096}
    equal_copy = dict(config)
    assert cache.put((config,), ("tp", 2), "two") == "two"
    assert cache.get((config,), ("tp", 2)) == "two"
    assert cache.get((config,), ("tp", 4)) is None
    assert cache.get((equal_copy,), ("tp", 2)) is None  # equal, but another object


def test_an_entry_keeps_its_objects_alive_so_their_ids_stay_theirs() -> None:
    cache: IdentityCache[int] = IdentityCache(8)
    cache.put(([1, 2],), (), 1)  # the list exists only inside the cache now
    newcomers = [[1, 2] for _ in range(1000)]  # none can take the kept list's id
    assert all(cache.get((n,), ()) is None for n in newcomers)


def test_emptied_when_full() -> None:
    cache: IdentityCache[int] = IdentityCache(2)
    a, b, c = object(), object(), object()
    cache.put((a,), (), 1)
    cache.put((b,), (), 2)
    assert cache.full()
    cache.put((c,), (), 3)
    assert (cache.get((a,), ()), cache.get((b,), ()), cache.get((c,), ())) == (None, None, 3)
    assert not cache.full()
