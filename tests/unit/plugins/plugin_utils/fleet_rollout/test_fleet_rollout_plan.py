"""Rollout plans: batch sizes (as Ansible cuts serial batches), rollout groups, capacity."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ansible.executor.playbook_executor import PlaybookExecutor
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.plan import (
    RolloutError,
    batch_sizes,
    default_group,
    rollout_plan,
)


def ansible_batches(serial: list, count: int) -> list[int]:
    """Batch sizes Ansible itself makes for a play with this serial over count hosts."""
    hosts = [f"h{i}" for i in range(count)]
    fake = SimpleNamespace(_inventory=SimpleNamespace(get_hosts=lambda *a, **k: list(hosts)))
    play = SimpleNamespace(serial=serial, hosts="all", order=None)
    return [len(b) for b in PlaybookExecutor._get_serialized_batches(fake, play)]


SERIALS = [
    [1, "25%", "100%"],
    [1],
    ["50%"],
    [2, 3],
    ["10%", "30%"],
    [1, "33%", "100%"],
    [0],
    ["100%"],
    [3, 1],
]


@pytest.mark.parametrize("serial", SERIALS)
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 16, 33])
def test_batch_sizes_match_ansible(serial: list, count: int) -> None:
    assert batch_sizes(serial, count) == ansible_batches(serial, count)


@pytest.mark.parametrize(
    ("serial", "count", "expected"),
    [
        ([1, "25%", "100%"], 16, [1, 4, 11]),
        ([1, "25%", "100%"], 2, [1, 1]),
        ([1, "25%", "100%"], 1, [1]),
        (1, 3, [1, 1, 1]),
        ("50%", 5, [2, 2, 1]),
    ],
)
def test_batch_sizes(serial: object, count: int, expected: list[int]) -> None:
    assert batch_sizes(serial, count) == expected


@pytest.mark.parametrize("serial", [[], ["abc"], [-1], ["0%"], ["150%"], [True], [1.5]])
def test_batch_sizes_errors(serial: list) -> None:
    with pytest.raises(RolloutError) as err:
        batch_sizes(serial, 4, "fleet_rollout_serial of h100_nodes")
    assert "fleet_rollout_serial" in str(err.value)


GROUPS = {
    "all": ["a1", "a2", "b1", "gw"],
    "gpu_nodes": ["a1", "a2", "b1"],
    "h100_nodes": ["a1", "a2"],
    "rtx4090_nodes": ["b1"],
    "dc1": ["a1", "a2", "b1", "gw"],
    "big": ["a1", "a2", "b1"],
}


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["dc1", "gpu_nodes", "h100_nodes", "big"], "h100_nodes"),  # smallest GPU-only group
        (["dc1", "gpu_nodes", "rtx4090_nodes", "big"], "rtx4090_nodes"),
        (["dc1", "gpu_nodes"], "gpu_nodes"),  # dc1 also holds the gateway
        (["gpu_nodes", "big"], "big"),
        ([], "gpu_nodes"),
    ],
)
def test_default_group(names: list[str], expected: str) -> None:
    assert default_group(names, GROUPS, "gpu_nodes") == expected


def _members(spec: dict[str, list[str]], serial: dict[str, object] | None = None) -> list[dict]:
    return [
        {"host": h, "group": g, "serial": (serial or {}).get(g, [1, "25%", "100%"])}
        for g, hs in spec.items()
        for h in hs
    ]


def test_plan_keeps_groups_together_with_their_own_batches() -> None:
    members = _members(
        {"h100": [f"h{i}" for i in range(8)], "rtx": ["r1", "r2"]}, {"h100": [1, "50%"], "rtx": [1, 1]}
    )
    # play order interleaves the groups: the plan regroups them
    members = [members[0], members[8], *members[1:8], members[9]]
    plan = rollout_plan(members)
    assert plan["order"] == [f"h{i}" for i in range(8)] + ["r1", "r2"]
    assert plan["batches"] == [1, 4, 3, 1, 1]
    assert plan["canaries"] == ["h0", "r1"]
    assert plan["groups"][0]["batches"] == [["h0"], ["h1", "h2", "h3", "h4"], ["h5", "h6", "h7"]]
    assert plan["label"]["h5"] == "h100 batch 3/3"
    assert plan["label"]["r2"] == "rtx batch 2/2"
    # a failure in h100's batch 2 leaves h5.. and the rtx group untouched
    assert plan["order"][plan["next_index"]["h3"] :] == ["h5", "h6", "h7", "r1", "r2"]
    assert plan["next_index"]["h0"] == 1 and plan["next_index"]["r2"] == 10
    assert plan["problems"] == []


def test_plan_group_order_and_unknown_groups() -> None:
    plan = rollout_plan(_members({"a": ["a1"], "b": ["b1", "b2"]}), group_order=["b", "zzz"])
    assert plan["order"] == ["b1", "b2", "a1"]
    assert plan["canaries"] == ["b1", "a1"]
    assert plan["unknown_groups"] == ["zzz"]


MODELS = {
    "a1": [{"name": "llama", "port": 8000}],
    "a2": [{"name": "llama", "port": 8000}],
    "a3": [{"name": "llama", "port": 8000}, {"name": "qwen", "port": 8001}],
    "b1": [{"name": "solo", "port": 8000}],
}


@pytest.mark.parametrize(
    ("spec", "serial", "minimum", "needles"),
    [
        ({"a": ["a1", "a2", "a3"]}, [1], 1, ["qwen is served by a3 only"]),
        ({"a": ["a1", "a2"]}, [1], 1, []),  # a3 keeps serving llama
        ({"a": ["a1", "a2"]}, ["100%"], 1, []),  # a3 left
        ({"a": ["a1", "a2"]}, ["100%"], 2, ["batch 1/1 of a (a1, a2) takes 2 of the 3 hosts serving llama"]),
        ({"b": ["b1"]}, [1], 1, ["solo is served by b1 only: replacing it means downtime"]),
        ({"a": ["a1"]}, [1], 3, ["leaving 2"]),
    ],
)
def test_plan_capacity_problems(spec: dict, serial: list, minimum: int, needles: list[str]) -> None:
    plan = rollout_plan(
        _members(spec, dict.fromkeys(spec, serial)), models_by_host=MODELS, min_available=minimum
    )
    assert len(plan["problems"]) == len(needles), plan["problems"]
    for problem, needle in zip(plan["problems"], needles, strict=True):
        assert needle in problem
        assert "fleet_rollout_min_available" in problem
    accepted = rollout_plan(
        _members(spec, dict.fromkeys(spec, serial)),
        models_by_host=MODELS,
        min_available=minimum,
        allow_downtime=True,
    )
    assert accepted["problems"] == []


@pytest.mark.parametrize(
    ("members", "needle"),
    [
        ([{"group": "a"}], "must be a mapping with host"),
        (["h1"], "must be a mapping with host"),
        ([{"host": "h1", "group": ""}], "fleet_rollout_group is empty"),
        ([{"host": "h1", "group": "a", "serial": ["x"]}], "fleet_rollout_serial of a"),
    ],
)
def test_plan_errors(members: list, needle: str) -> None:
    with pytest.raises(RolloutError) as err:
        rollout_plan(members)
    assert needle in str(err.value)


def test_plan_ignores_a_host_listed_twice() -> None:
    plan = rollout_plan([{"host": "h1", "group": "a"}, {"host": "h1", "group": "b"}])
    assert plan["order"] == ["h1"] and plan["batches"] == [1]
