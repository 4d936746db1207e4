"""A serving group in a rollout: one unit through every step, gated through rank 0, restored as one."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.gates import (
    readiness_checks,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.plan import rollout_plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.units import (
    restore_verdict,
    stragglers,
    unit_of,
    unit_restarts,
)

MODELS = [{"name": "llama-405b", "port": 8000}]


def _member(host: str, unit: str | None = None, leader: bool = False) -> dict:
    out: dict = {"host": host, "group": "llama", "serial": [1, "100%"]}
    if unit:
        out.update(unit=unit, leader=leader)
    return out


def _plan() -> dict:
    # inventory order puts a follower first: the unit still names rank 0 first
    members = [
        _member("a1", "llama_a"),
        _member("a0", "llama_a", leader=True),
        _member("solo"),
        _member("b0", "llama_b", leader=True),
        _member("b1", "llama_b"),
    ]
    hosts = ("a0", "a1", "b0", "b1", "solo")
    return rollout_plan(members, models_by_host={h: MODELS for h in hosts})


def test_the_plan_names_each_hosts_unit_rank_0_first_and_the_followers() -> None:
    plan = _plan()
    assert plan["units"] == {
        "a1": ["a0", "a1"],
        "a0": ["a0", "a1"],
        "solo": ["solo"],
        "b0": ["b0", "b1"],
        "b1": ["b0", "b1"],
    }
    assert plan["followers"] == ["a1", "b1"]


def test_unit_of_a_host_the_plan_does_not_name_is_the_host_alone() -> None:
    units = _plan()["units"]
    assert unit_of(units, "a1") == ["a0", "a1"]
    assert unit_of(units, "other") == ["other"]
    assert unit_of({}, "solo") == ["solo"]


@pytest.mark.parametrize(
    ("reached", "behind"),
    [
        ({"a0": "gated", "a1": "gated"}, []),
        # the follower failed its gate: it is still at the step before, rank 0 must fail with it
        ({"a0": "gated", "a1": "drained"}, ["a1"]),
        # rank 0 failed: the follower fails too
        ({"a0": "drained", "a1": "gated"}, ["a0"]),
        # a member that never got as far as the first step
        ({"a1": "gated"}, ["a0"]),
    ],
)
def test_stragglers_are_the_members_that_did_not_pass_the_step(reached: dict, behind: list) -> None:
    assert stragglers(["a0", "a1"], reached, "gated") == behind


def test_a_host_serving_alone_is_never_held_back_by_others() -> None:
    assert stragglers(["solo"], {"solo": "gated", "a1": "drained"}, "gated") == []


@pytest.mark.parametrize(
    ("errors", "undrain", "failed"),
    [
        ({"a0": "", "a1": ""}, True, []),
        # the follower's restore failed: rank 0, the group's only upstream, stays drained
        ({"a0": "", "a1": "Require the restored containers of a follower to run: exited"}, False, ["a1"]),
        ({"a0": "Check that the restored models answer: timeout", "a1": ""}, False, ["a0"]),
        # whitespace is no error; a member without an entry did not run the restore at all
        ({"a0": "  ", "a1": None}, True, []),
    ],
)
def test_a_group_goes_back_in_service_only_when_every_member_was_restored(
    errors: dict, undrain: bool, failed: list
) -> None:
    for host in ("a0", "a1"):
        verdict = restore_verdict(host, ["a0", "a1"], errors)
        assert (verdict["undrain"], verdict["failed"], verdict["unit"]) == (undrain, failed, ["a0", "a1"])


def test_a_lone_host_goes_back_on_its_own_restore() -> None:
    assert restore_verdict("solo", ["solo"], {"solo": "", "a1": "broken"})["undrain"] is True
    assert restore_verdict("solo", [], {"solo": "broken"}) == {
        "undrain": False,
        "failed": ["solo"],
        "unit": ["solo"],
    }


def _fact(role: str | None, url: str) -> dict:
    current = {"version": "v2", "container": "vllm-llama", "url": url}
    if role:
        current["serving_group"] = {
            "name": "llama_a",
            "members": ["a0", "a1"],
            "rank": 0 if role == "leader" else 1,
            "role": role,
            "backend": "mp",
            "rendezvous": "10.0.0.1:29501",
        }
    return {"models": {"llama": {"current": current, "previous": None}}}


@pytest.mark.parametrize(
    ("role", "url", "check"),
    [
        (None, "http://10.0.0.3:8000", "http"),
        ("leader", "http://10.0.0.1:8000", "http"),
        # a follower runs --headless: no URL to ask, its container must run
        ("follower", "", "running"),
    ],
)
def test_readiness_checks_gate_a_follower_by_its_container(role: str | None, url: str, check: str) -> None:
    assert readiness_checks(_fact(role, url), ["llama"]) == [
        {"model": "llama", "container": "vllm-llama", "url": url, "check": check, "task": "generate"}
    ]


def test_readiness_checks_of_a_model_without_record_ask_its_api() -> None:
    # the gate refuses a missing record before; the check then fails naming the model
    assert readiness_checks({}, ["llama"]) == [
        {"model": "llama", "container": "", "url": "", "check": "http", "task": "generate"}
    ]


@pytest.mark.parametrize(
    ("rollbacks", "unchanged", "restart"),
    [
        # rank 0 goes back to the version before: the follower still on it restarts to rejoin it
        ({"a0": ["llama"], "a1": []}, ["llama"], ["llama"]),
        ({"a0": [], "a1": ["llama"]}, ["llama"], ["llama"]),
        # nothing was replaced (the drain failed): the group keeps running as it is
        ({"a0": [], "a1": []}, ["llama"], []),
        ({}, ["llama"], []),
    ],
)
def test_a_member_restarts_when_any_member_of_its_group_is_restored(
    rollbacks: dict, unchanged: list, restart: list
) -> None:
    assert unit_restarts(["a0", "a1"], rollbacks, unchanged) == restart


def test_a_lone_host_never_restarts_what_still_runs() -> None:
    assert unit_restarts(["solo"], {"solo": ["m1"]}, ["m2"]) == []
