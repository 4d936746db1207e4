"""The doctor's serving-group checks: one driver and CUDA, clocks together, rank 0's port reachable."""

from __future__ import annotations

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops.doctor import evaluate
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops.doctor.groups import (
    check_serving_groups,
)


def member(
    host: str, rank: int, driver: str = "580.95.05", cuda: str = "13.0", epoch: float = 1000.0, **more
):
    return {
        "host": host,
        "serving_group": {"name": "llama_a", "rank": rank, "rank0": "a0", "members": ["a0", "a1"]},
        "probe": {"time": {"epoch": epoch, "controller_time": 1000.0}},
        "received_time": 1000.2,
        "gpu": {"driver_version": driver, "cuda_version": cuda},
        **more,
    }


def rows(records):
    return [
        (r["check"], r["host"], r["status"]) for r in check_serving_groups(records, {"max_clock_skew_s": 1})
    ]


def test_a_consistent_group_passes():
    reached = {"target": "10.0.0.1:29501", "reachable": True}
    assert rows([member("a0", 0), member("a1", 1, rendezvous=reached)]) == [
        ("group_driver", "a0", "pass"),
        ("group_cuda", "a0", "pass"),
        ("group_clock", "a0", "pass"),
        ("group_rendezvous", "a1", "pass"),
    ]


def test_a_member_on_another_driver_and_a_skewed_clock_fail_naming_it():
    found = check_serving_groups(
        [member("a1", 1, driver="570.86.15", cuda="12.8", epoch=1004.0), member("a0", 0)],
        {"max_clock_skew_s": 1},
    )
    failed = {(r["check"], r["host"]) for r in found if r["status"] == "fail"}
    assert failed == {("group_driver", "a1"), ("group_cuda", "a1"), ("group_clock", "a1")}
    driver = next(r for r in found if r["check"] == "group_driver")
    assert driver["detail"].startswith("driver 570.86.15 but a0 (rank 0) runs 580.95.05")
    clock = next(r for r in found if r["check"] == "group_clock")
    assert "differ by up to 3.8 s (a1 ahead of a0)" in clock["detail"]


def test_an_unreachable_rendezvous_is_a_warning_with_the_fix():
    blocked = {
        "target": "10.0.0.1:29501",
        "reachable": False,
        "detail": "Timeout when waiting for 10.0.0.1:29501",
    }
    (row,) = [r for r in check_serving_groups([member("a0", 0), member("a1", 1, rendezvous=blocked)], {})
              if r["check"] == "group_rendezvous"]  # fmt: skip
    assert row["status"] == "warn" and "allow TCP 10.0.0.1:29501" in row["fix"]


def test_hosts_outside_groups_get_no_group_check():
    assert rows([{"host": "solo", "probe": {"time": {}}, "gpu": {"driver_version": "580"}}]) == []
    assert not [r for r in evaluate([{"host": "solo"}]) if r["check"].startswith("group_")]
