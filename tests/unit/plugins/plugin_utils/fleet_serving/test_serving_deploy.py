"""Container command lines, GPU sets, hashes and the deployment record of the vllm_server role."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError

PLANNED = ["--tensor-parallel-size", "2", "--max-model-len", "32768", "--gpu-memory-utilization", "0.9"]


@pytest.mark.parametrize(
    ("planned", "extra", "expected_tail"),
    [
        (PLANNED, [], PLANNED),
        (PLANNED, ["--enable-prefix-caching"], [*PLANNED, "--enable-prefix-caching"]),
        (PLANNED, ["--seed", "7"], [*PLANNED, "--seed", "7"]),
        (PLANNED, ["--seed=7"], [*PLANNED, "--seed", "7"]),
        # role-managed flags emitted by a planner are dropped, the role sets them itself
        (["--host", "0.0.0.0", "--port", "1", "--max-num-seqs", "8"], [], ["--max-num-seqs", "8"]),
        (["--max-model-len", "-1"], [], ["--max-model-len", "-1"]),
    ],
)
def test_vllm_command(planned: list, extra: list, expected_tail: list) -> None:
    cmd = deploy.vllm_command("/srv/models/org/m/rev", "m", "10.0.0.5", 8000, planned, extra)
    assert cmd[:7] == [
        "/srv/models/org/m/rev",
        "--served-model-name",
        "m",
        "--host",
        "10.0.0.5",
        "--port",
        "8000",
    ]
    assert cmd[7:] == expected_tail


@pytest.mark.parametrize(
    ("path", "port", "extra", "needle"),
    [
        ("/m", 8000, ["--max-model-len", "4096"], "overrides.max_model_len"),
        ("/m", 8000, ["--tensor-parallel-size=4"], "overrides.tensor_parallel_size"),
        ("/m", 8000, ["--enforce-eager"], "overrides.enforce_eager"),
        ("/m", 8000, ["--kv-cache-memory-bytes", "64M"], "overrides.kv_cache_memory_bytes"),
        ("/m", 8000, ["--api-key", "secret"], "VLLM_API_KEY"),
        ("/m", 8000, ["--port", "9000"], "vllm_server_models[].port"),
        ("/m", 8000, ["some/model"], "not a flag"),
        ("relative/path", 8000, [], "absolute"),
        ("/m", 70000, [], "1-65535"),
        ("/m", "http", [], "must be a number"),
    ],
)
def test_vllm_command_rejects(path: str, port: object, extra: list, needle: str) -> None:
    with pytest.raises(ServingError, match=r".*") as err:
        deploy.vllm_command(path, "m", "10.0.0.5", port, PLANNED, extra)
    assert needle in str(err.value)


def test_split_flags() -> None:
    assert deploy.split_flags(["/m", "--a", "1", "2", "--b", "--c=x"]) == [
        ("", ["/m"]),
        ("--a", ["1", "2"]),
        ("--b", []),
        ("--c", ["x"]),
    ]


def test_stable_hash_ignores_key_order_and_sees_values() -> None:
    a = deploy.stable_hash({"image": "x", "args": ["--a", "1"]})
    assert a == deploy.stable_hash({"args": ["--a", "1"], "image": "x"})
    assert a != deploy.stable_hash({"image": "x", "args": ["--a", "2"]})
    assert len(a) == 16


@pytest.mark.parametrize(
    ("requests", "count", "expected"),
    [
        ([{"name": "a", "count": 8}], 8, {"a": [0, 1, 2, 3, 4, 5, 6, 7]}),
        ([{"name": "a", "count": 1}], 8, {"a": [0]}),
        ([{"name": "a", "count": 4}, {"name": "b", "count": 4}], 8, {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]}),
        # aligned placement: a 2-GPU model after a 1-GPU one starts at GPU 2, not 1
        ([{"name": "a", "count": 1}, {"name": "b", "count": 2}], 4, {"a": [0], "b": [2, 3]}),
        # explicit sets are kept and auto sets avoid them
        (
            [{"name": "a", "count": 2}, {"name": "b", "count": 2, "gpus": [0, 1]}],
            4,
            {"a": [2, 3], "b": [0, 1]},
        ),
        # no aligned block left: first contiguous block
        ([{"name": "a", "count": 2, "gpus": [1, 2]}, {"name": "b", "count": 1}], 4, {"a": [1, 2], "b": [0]}),
        ([{"name": "a", "count": 1, "gpus": [0]}, {"name": "b", "count": 2, "gpus": [2]}], 4, None),
        # no contiguous block: any free GPUs
        (
            [
                {"name": "a", "count": 1, "gpus": [1]},
                {"name": "b", "count": 1, "gpus": [3]},
                {"name": "c", "count": 2},
            ],
            4,
            {"a": [1], "b": [3], "c": [0, 2]},
        ),
    ],
)
def test_assign_gpu_sets(requests: list, count: int, expected: dict | None) -> None:
    if expected is None:
        with pytest.raises(ServingError, match="plan needs 2"):
            deploy.assign_gpu_sets(requests, count)
    else:
        assert deploy.assign_gpu_sets(requests, count) == expected


@pytest.mark.parametrize(
    ("requests", "count", "needle"),
    [
        ([{"name": "a", "count": 4}, {"name": "b", "count": 8}], 8, "need 12 (a: 4, b: 8)"),
        ([{"name": "a", "count": 1, "gpus": [8]}], 8, "GPU 8 does not exist"),
        ([{"name": "a", "count": 1, "gpus": [0]}, {"name": "b", "count": 1, "gpus": [0]}], 2, "both a and b"),
        ([{"name": "a", "count": 2, "gpus": [1, 1]}], 2, "twice"),
        ([{"name": "a", "count": 1, "gpus": ["x"]}], 2, "not a GPU index"),
    ],
)
def test_assign_gpu_sets_errors(requests: list, count: int, needle: str) -> None:
    with pytest.raises(ServingError) as err:
        deploy.assign_gpu_sets(requests, count)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    ("weights", "expected"),
    [(0, 300), (None, 300), (2**30 * 16, 540), (2**30 * 1000, 3600), ("junk", 300)],
)
def test_readiness_timeout(weights: object, expected: int) -> None:
    assert deploy.readiness_timeout(weights) == expected


def test_plan_summary_keeps_figures_and_warnings() -> None:
    plan = {
        "feasible": True,
        "tensor_parallel_size": 2,
        "kv_cache_tokens": 10,
        "vllm_args": [],
        "warnings": ["w"],
    }
    assert deploy.plan_summary(plan) == {"tensor_parallel_size": 2, "kv_cache_tokens": 10, "warnings": ["w"]}


def _rec(h: str, **extra: object) -> dict:
    return {"version": h, "image": f"img:{h}", **extra}


@pytest.mark.parametrize(
    ("existing", "records", "expected"),
    [
        # first deployment
        ({}, {"m": _rec("a")}, {"m": {"current": {**_rec("a"), "deployed_at": "T2"}, "previous": None}}),
        # garbage fact content is treated as empty
        ("junk", {"m": _rec("a")}, {"m": {"current": {**_rec("a"), "deployed_at": "T2"}, "previous": None}}),
        # unchanged: the stored record (and its time) stays
        (
            {"models": {"m": {"current": {**_rec("a"), "deployed_at": "T1"}, "previous": None}}},
            {"m": _rec("a")},
            {"m": {"current": {**_rec("a"), "deployed_at": "T1"}, "previous": None}},
        ),
        # unchanged, measured figures missing so far: filled in
        (
            {
                "models": {
                    "m": {"current": {**_rec("a"), "actual": {}, "deployed_at": "T1"}, "previous": None}
                }
            },
            {"m": _rec("a", actual={"kv_cache_tokens": 5})},
            {
                "m": {
                    "current": {**_rec("a"), "actual": {"kv_cache_tokens": 5}, "deployed_at": "T1"},
                    "previous": None,
                }
            },
        ),
        # new version: current moves to previous
        (
            {"models": {"m": {"current": {**_rec("a"), "deployed_at": "T1"}, "previous": {"version": "z"}}}},
            {"m": _rec("b")},
            {
                "m": {
                    "current": {**_rec("b"), "deployed_at": "T2"},
                    "previous": {**_rec("a"), "deployed_at": "T1"},
                }
            },
        ),
        # unchanged version: the description is refreshed, time and measurements are kept
        (
            {
                "models": {
                    "m": {
                        "current": {**_rec("a"), "old": 1, "baseline": {"s": 1}, "deployed_at": "T1"},
                        "previous": None,
                    }
                }
            },
            {"m": _rec("a", baseline={"s": 2}, url="u")},
            {
                "m": {
                    "current": {**_rec("a"), "url": "u", "baseline": {"s": 1}, "deployed_at": "T1"},
                    "previous": None,
                }
            },
        ),
        # a model no longer deployed is dropped, a new one appears
        (
            {"models": {"old": {"current": _rec("a"), "previous": None}}},
            {"new": _rec("b")},
            {"new": {"current": {**_rec("b"), "deployed_at": "T2"}, "previous": None}},
        ),
    ],
)
def test_update_deployments(existing: object, records: dict, expected: dict) -> None:
    assert deploy.update_deployments(existing, records, "T2") == {
        "schema": deploy.FACT_SCHEMA,
        "models": expected,
    }


FACT = {"models": {"m": {"current": _rec("b"), "previous": _rec("a")}}}


@pytest.mark.parametrize(
    ("fact", "running", "expected"),
    [
        (FACT, "b", "a"),  # running the recorded current: go back to previous
        (FACT, "c", "b"),  # a deployment failed half-way: go back to current
        (FACT, None, "a"),
    ],
)
def test_rollback_target(fact: dict, running: str | None, expected: str) -> None:
    assert deploy.rollback_target(fact, "m", running)["version"] == expected


@pytest.mark.parametrize(
    ("fact", "needle"),
    [
        ({}, "no deployment of m"),
        ({"models": {"m": {"current": _rec("b"), "previous": None}}}, "nothing to roll back to"),
    ],
)
def test_rollback_target_errors(fact: dict, needle: str) -> None:
    with pytest.raises(ServingError) as err:
        deploy.rollback_target(fact, "m", "b")
    assert needle in str(err.value)


def test_update_deployments_without_pruning_keeps_other_models() -> None:
    existing = {
        "models": {
            "a": {"current": _rec("1"), "previous": None},
            "b": {"current": _rec("2"), "previous": None},
        }
    }
    result = deploy.update_deployments(existing, {"b": _rec("3")}, "T", prune=False)
    assert result["models"]["a"] == {"current": _rec("1"), "previous": None}
    assert result["models"]["b"] == {"current": {**_rec("3"), "deployed_at": "T"}, "previous": _rec("2")}
    assert list(deploy.update_deployments(existing, {"b": _rec("3")}, "T")["models"]) == ["b"]


def test_rollback_then_record_swaps_current_and_previous() -> None:
    fact = deploy.update_deployments({}, {"m": _rec("old")}, "T1")
    fact = deploy.update_deployments(fact, {"m": _rec("new")}, "T2")
    target = deploy.rollback_target(fact, "m", "new")
    assert target["version"] == "old"
    fact = deploy.update_deployments(fact, {"m": target}, "T3")
    assert fact["models"]["m"]["current"]["version"] == "old"
    assert fact["models"]["m"]["previous"]["version"] == "new"


def test_a_restore_after_a_failed_change_puts_the_history_back() -> None:
    """An upgrade whose canary failed is restored: the failed version must not become "previous" (a later
    rollback.yml would move to it); the version before keeps its own history, time and measurements."""
    fact = deploy.update_deployments({}, {"m": _rec("z")}, "T0")
    fact = deploy.update_deployments(fact, {"m": _rec("a", baseline={"s": 1})}, "T1")
    before = fact
    fact = deploy.update_deployments(fact, {"m": _rec("canary")}, "T2")  # the change
    target = deploy.rollback_target(fact, "m", "canary")
    restored = deploy.update_deployments(fact, {"m": target}, "T3", prune=False, earlier=before)
    assert restored["models"]["m"] == before["models"]["m"]
    assert deploy.rollback_target(restored, "m", "a")["version"] == "z"
    # without the earlier fact (rollback.yml, a change that did not fail) the swap stays
    swapped = deploy.update_deployments(fact, {"m": target}, "T3", prune=False)
    assert swapped["models"]["m"]["previous"]["version"] == "canary"
    # a model the earlier fact ran at another version is recorded as usual
    other = deploy.update_deployments(fact, {"m": _rec("b")}, "T3", prune=False, earlier=before)
    assert (other["models"]["m"]["current"]["version"], other["models"]["m"]["previous"]["version"]) == (
        "b",
        "canary",
    )


@pytest.mark.parametrize(
    ("stop", "version", "expected"),
    [
        (60, "0.32.0", ["--shutdown-timeout", "55"]),  # vLLM drains, Docker keeps 5 s to see it exit
        (60, "v0.18.0", ["--shutdown-timeout", "55"]),  # the first release with the flag
        (3, "0.34.0", ["--shutdown-timeout", "0"]),  # no time to drain: vLLM's own default
        (60, "0.17.1", []),  # no such flag before 0.18: nothing vLLM would refuse
        (None, "0.32.0", []),  # no stop timeout given: no drain flag
    ],
)
def test_vllm_command_drain_flag(stop: object, version: str, expected: list) -> None:
    cmd = deploy.vllm_command("/m", "m", "10.0.0.5", 8000, PLANNED, [], stop, version)
    drain = cmd[cmd.index("--shutdown-timeout") : cmd.index("--shutdown-timeout") + 2] if expected else []
    assert drain == expected
    assert ("--shutdown-timeout" in cmd) == bool(expected)


@pytest.mark.parametrize(
    ("stop", "version", "needle"),
    [
        ("soon", "0.32.0", "vllm_server_stop_timeout must be a number of seconds, got 'soon'"),
        (-1, "0.32.0", "vllm_server_stop_timeout must be >= 0"),
        (60, "nightly", "vllm_version: cannot parse 'nightly'"),
    ],
)
def test_vllm_command_drain_flag_rejects(stop: object, version: str, needle: str) -> None:
    with pytest.raises(ServingError, match=needle):
        deploy.vllm_command("/m", "m", "10.0.0.5", 8000, PLANNED, [], stop, version)


def test_extra_args_may_not_set_the_drain_flag() -> None:
    with pytest.raises(
        ServingError, match="sets --shutdown-timeout: remove it, it comes from vllm_server_stop_timeout"
    ):
        deploy.vllm_command("/m", "m", "10.0.0.5", 8000, PLANNED, ["--shutdown-timeout", "9"], 60, "0.32.0")
