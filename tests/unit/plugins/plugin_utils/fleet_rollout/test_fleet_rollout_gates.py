"""Rollout decisions: the latency gate, the restore of a failed host, the soak verdict."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.gates import (
    container_name,
    containers,
    failed_checks,
    latency_gate,
    restore_plan,
    snapshot,
    soak_verdict,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy

BASE = {"completion_seconds": 0.2, "ttft_seconds": 0.1}


@pytest.mark.parametrize(
    ("measured", "baseline", "ok", "failed"),
    [
        ([{"completion_seconds": 0.5, "ttft_seconds": 0.25}], BASE, True, []),
        ([{"completion_seconds": 1.5, "ttft_seconds": 0.25}], BASE, False, ["completion_seconds"]),
        # the best of several samples counts: one slow outlier does not fail a healthy server
        (
            [
                {"completion_seconds": 5.0, "ttft_seconds": 0.9},
                {"completion_seconds": 0.3, "ttft_seconds": 0.1},
            ],
            BASE,
            True,
            [],
        ),
        # the floor: 3 x 0.01 s would be 0.03 s, the floor allows 1 s
        (
            [{"completion_seconds": 0.9, "ttft_seconds": 0.9}],
            {"completion_seconds": 0.01, "ttft_seconds": 0.01},
            True,
            [],
        ),
        (
            [{"completion_seconds": 1.1, "ttft_seconds": 0.1}],
            {"completion_seconds": 0.01},
            False,
            ["completion_seconds"],
        ),
        # no baseline recorded (first deployment by an older role): not judged
        ([{"completion_seconds": 9.0, "ttft_seconds": 9.0}], None, True, []),
        ([{"completion_seconds": 9.0, "ttft_seconds": 9.0}], {"completion_seconds": None}, True, []),
        # not measured at all fails
        ([{"completion_seconds": 0.1}], BASE, False, ["ttft_seconds"]),
        ([], BASE, False, ["completion_seconds", "ttft_seconds"]),
    ],
)
def test_latency_gate(measured: list, baseline: dict | None, ok: bool, failed: list[str]) -> None:
    result = latency_gate(measured, baseline, 3.0, 1.0)
    assert result["ok"] is ok
    assert result["failed"] == failed


def test_latency_gate_summary_and_limits() -> None:
    result = latency_gate([{"completion_seconds": 0.7, "ttft_seconds": 0.2}], BASE, 3.0, 0.1)
    assert result["checks"][0]["limit"] == pytest.approx(0.6)
    assert "completion_seconds 0.700s vs baseline 0.200s (limit 0.600s)" in result["summary"]
    with pytest.raises(ValueError, match="fleet_rollout_gate_latency_factor"):
        latency_gate([], BASE, 0.5, 1.0)


def _rec(version: str, container: str = "vllm-m") -> dict:
    return {
        "version": version,
        "container": container,
        "url": "http://10.0.0.1:8000",
        "image": "img:" + version,
    }


def _fact(**models: tuple[str, str | None]) -> dict:
    return {
        "models": {
            name: {"current": _rec(cur), "previous": _rec(prev) if prev else None}
            for name, (cur, prev) in models.items()
        }
    }


def test_snapshot_keeps_what_a_restore_and_a_gate_need() -> None:
    fact = _fact(m=("a", None))
    fact["models"]["m"]["current"]["baseline"] = BASE
    fact["models"]["broken"] = {"current": None}
    assert snapshot(fact) == {
        "m": {
            "version": "a",
            "container": "vllm-m",
            "url": "http://10.0.0.1:8000",
            "image": "img:a",
            "baseline": BASE,
        }
    }
    assert snapshot({}) == {} and snapshot("garbage") == {}


@pytest.mark.parametrize(
    ("fact", "running", "declared", "expected"),
    [
        # the new version never came up (not recorded): back to the recorded current
        (_fact(m=("a", None)), {"m": "b"}, ["m"], {"rollback": ["m"], "unchanged": []}),
        # the new version was recorded, then the gate failed: back to the previous record
        (_fact(m=("b", "a")), {"m": "b"}, ["m"], {"rollback": ["m"], "unchanged": []}),
        (_fact(m=("b", "a")), {"m": ""}, ["m"], {"rollback": ["m"], "unchanged": []}),
        # the failure came before the container changed: nothing to restore
        (_fact(m=("a", None)), {"m": "a"}, ["m"], {"rollback": [], "unchanged": ["m"]}),
        # a model the change added is removed
        (_fact(m=("a", None)), {"m": "a", "new": "x"}, ["m", "new"], {"rollback": [], "remove": ["new"]}),
        (_fact(m=("a", None)), {"m": "a"}, ["m", "new"], {"rollback": [], "remove": []}),
        # cannot be restored from the records
        (_fact(m=("a", None)), {"m": ""}, ["m"], {"stuck": "its container is gone"}),
        (_fact(m=("b", "z")), {"m": "b"}, ["m"], {"stuck": "the previous record is z, not a"}),
        (_fact(m=("b", "a")), {"m": "c"}, ["m"], {"stuck": "it runs c, neither b nor a"}),
        ({"models": {}}, {"m": ""}, [], {"stuck": "record is gone"}),
    ],
)
def test_restore_plan(fact: dict, running: dict, declared: list, expected: dict) -> None:
    before = snapshot(_fact(m=("a", None)))
    result = restore_plan(before, fact, running, declared)
    for key, value in expected.items():
        if key == "stuck":
            assert len(result["stuck"]) == 1 and value in result["stuck"][0]["reason"]
            assert result["rollback"] == []
        else:
            assert result[key] == value


@pytest.mark.parametrize(
    ("fact", "running"),
    [(_fact(m=("a", None)), "b"), (_fact(m=("b", "a")), "b")],
)
def test_restore_plan_agrees_with_the_role_rollback(fact: dict, running: str) -> None:
    """What restore_plan sends to vllm_server's rollback ends on the version that ran before."""
    before = snapshot(_fact(m=("a", None)))
    assert restore_plan(before, fact, {"m": running}, ["m"])["rollback"] == ["m"]
    assert deploy.rollback_target(fact, "m", running)["version"] == "a"


def test_containers_prefers_records_then_the_role_naming() -> None:
    before = snapshot(_fact(m=("a", None)))
    fact = {"models": {"n": {"current": _rec("x", container="node-vllm-n")}}}
    assert containers(before, fact, ["m", "n", "Qwen/Qwen3 8B"], "node-vllm-") == {
        "m": "vllm-m",
        "n": "node-vllm-n",
        "Qwen/Qwen3 8B": "node-vllm-Qwen-Qwen3-8B",
    }
    assert container_name("vllm-", "a:b") == "vllm-a-b"


def _up(tries: int, errors: int = 0, header: float = 0.05) -> dict:
    ok = tries - errors
    return {
        "tries": tries,
        "errors": errors,
        "ok": ok,
        "header_time_sum": header * ok,
        "header_time_count": ok,
        "client_5xx": 0,
    }


CANARY = "10.0.0.1:8000"


@pytest.mark.parametrize(
    ("upstreams", "delta", "ok", "needle"),
    [
        ({CANARY: _up(50), "10.0.0.2:8000": _up(50)}, {}, True, ""),
        (
            {CANARY: _up(50, errors=1), "10.0.0.2:8000": _up(50)},
            {},
            False,
            "1 of 50 requests to the canary failed",
        ),
        (
            {CANARY: _up(50, header=0.8), "10.0.0.2:8000": _up(50, header=0.05)},
            {},
            False,
            "the canary answers in",
        ),
        # slower, but under the floor
        ({CANARY: _up(50, header=0.2), "10.0.0.2:8000": _up(50, header=0.05)}, {}, True, ""),
        (
            {CANARY: _up(50)},
            {"tiny": {"http_requests": 50, "http_errors": 3, "finished": 50, "finished_error": 0}},
            False,
            "vLLM: 3 of 50 requests failed",
        ),
        # no other server: vLLM's time to first token against the recorded baseline
        (
            {CANARY: _up(50)},
            {"tiny": {"http_requests": 50, "finished": 50, "ttft_sum": 50.0, "ttft_count": 50}},
            False,
            "time to first token 1.000s",
        ),
        # too little traffic to judge: passes with a note
        ({CANARY: _up(3, errors=3)}, {}, True, ""),
    ],
)
def test_soak_verdict(upstreams: dict, delta: dict, ok: bool, needle: str) -> None:
    gateway = {"upstreams": upstreams}
    result = soak_verdict(gateway, [CANARY], delta, {"tiny": 0.1}, 0.0, 2.0, 0.5, 10)
    assert result["ok"] is ok, result
    if needle:
        assert any(needle in p for p in result["problems"]), result["problems"]


def test_soak_verdict_notes_too_little_traffic_and_tolerates_an_error_rate() -> None:
    quiet = soak_verdict({"upstreams": {CANARY: _up(3)}}, [CANARY], {}, min_requests=10)
    assert quiet["ok"] and "fewer than fleet_rollout_soak_min_requests" in quiet["notes"][0]
    tolerated = soak_verdict({"upstreams": {CANARY: _up(100, errors=1)}}, [CANARY], {}, max_error_rate=0.02)
    assert tolerated["ok"] and tolerated["figures"]["gateway_errors"] == 1


def test_failed_checks_are_those_not_ready_even_when_not_marked_failed():
    # a loop registered with failed_when: false marks every result failed: false
    passed = {"ready": True, "failed": False, "item": ["tiny", 0]}
    refused = {"ready": False, "failed": False, "msg": "not ready: 503", "item": ["tiny", 1]}
    crashed = {"failed": False, "msg": "connection refused", "item": ["tiny", 2]}
    skipped = {"skipped": True, "item": ["tiny", 3]}
    assert failed_checks([passed, refused, crashed, skipped]) == [refused, crashed]
    assert failed_checks([passed, skipped]) == []
    assert failed_checks(None) == []
