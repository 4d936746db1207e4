"""Models on MIG instances: planned per GPU instance on real captures, one container per instance, routed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_validate as ic
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import PlanInputError, plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.mig import (
    mig_gpu_spec,
    mig_refusal,
    mig_targets,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import fleet, gateway
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.mig import (
    mig_device_requests,
    serving_units,
)
from nvidia_smi_profiles import PROFILES_DIR, capture
from planner_helpers import config


def _facts(profile: str) -> dict[str, Any]:
    return nvidia_smi.build_facts(
        nvidia_smi.parse_query(capture(profile, "-q") or ""),
        listed=nvidia_smi.parse_list_gpus(capture(profile, "-L") or ""),
    )


H200_MIG = _facts("h200x1-mig")  # 3g.71gb (two compute instances), 2g.35gb, 1g.18gb, 1g.18gb
H100_MIG = _facts("h100x1-mig")  # 3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb


def test_each_gpu_instance_is_one_target_with_its_memory_once() -> None:
    targets = mig_targets(H200_MIG, "all")
    assert [(t["label"], t["profile"], t["memory_total_mib"]) for t in targets] == [
        ("gpu0-gi2", "3g.71gb", 71424),
        ("gpu0-gi3", "2g.35gb", 33280),
        ("gpu0-gi9", "1g.18gb", 16384),
        ("gpu0-gi10", "1g.18gb", 16384),
    ]
    # two compute instances share GI 2's 71424 MiB: counted once, the sum stays under the card
    assert sum(t["memory_total_mib"] for t in targets) <= H200_MIG["gpus"][0]["memory_total_mib"]
    # the server runs on the compute instance with the most SMs (2c.3g.71gb, MIG device 1)
    first = targets[0]
    assert (first["mig_device"], first["uuid"], first["multiprocessor_count"]) == (
        1,
        "MIG-00000001-0000-0000-0000-000000000001",
        32,
    )


def test_the_public_two_compute_instance_capture_gives_the_same_instances() -> None:
    folder = PROFILES_DIR / "captures" / "h200-mig-2ci"
    facts = nvidia_smi.build_facts(
        nvidia_smi.parse_query((folder / "nvidia-smi-q.txt").read_text()),
        listed=nvidia_smi.parse_list_gpus((folder / "nvidia-smi-L.txt").read_text()),
    )
    assert [t["memory_total_mib"] for t in mig_targets(facts, "all")] == [71424, 33280, 16384, 16384]


def test_a_plan_on_an_instance_is_one_gpu_of_the_instance_memory() -> None:
    big, small = mig_targets(H200_MIG, ["3g.71gb", "MIG-00000003-0000-0000-0000-000000000003"])
    spec = mig_gpu_spec(big)
    assert (spec["name"], spec["memory_mib"], spec["count"], spec["compute_capability"]) == (
        "NVIDIA H200 MIG 3g.71gb",
        71424,
        1,
        "9.0",
    )
    result = plan(config("Qwen__Qwen3-8B"), spec)
    assert result["feasible"] and result["tensor_parallel_size"] == 1
    # the memory budget is the instance's (vLLM's gpu_memory_utilization x the instance's CUDA total)
    assert result["per_gpu_budget_bytes"] < 71424 * 2**20
    whole = plan(config("Qwen__Qwen3-8B"), {"name": "NVIDIA H200", "memory_mib": 143771, "count": 1})
    assert result["kv_cache_tokens"] < whole["kv_cache_tokens"] / 2
    refused = plan(config("Qwen__Qwen3-8B"), mig_gpu_spec(small))
    assert not refused["feasible"]
    message = mig_refusal(small, "qwen3-8b", refused["errors"])
    assert message.startswith("qwen3-8b does not fit MIG 1g.18gb (GPU 0 instance 9, 16.0 GiB): ")
    assert "vllm_server_models[qwen3-8b].mig: [<larger profile>]" in message
    # no fix that needs more GPUs: one server has exactly one instance
    assert "tensor_parallel_size 2" not in message and "nodes" not in message


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (["1g.18gb"], None),
        (["1c.3g.71gb"], "'1c.3g.71gb' is neither a GPU-instance profile"),
        (["4g.71gb"], "no GPU instance of profile 4g.71gb on this host (it has 1g.18gb, 2g.35gb, 3g.71gb)"),
        (
            ["3g.71gb", "MIG-00000000-0000-0000-0000-000000000000"],
            "selects GPU 0 instance 2 (3g.71gb) a second",
        ),
        ("3g.71gb", "expected 'all' or a list"),
        (["MIG-00000009-0000-0000-0000-000000000009"], "no GPU instance of MIG UUID"),
    ],
)
def test_selections(selection: Any, message: str | None) -> None:
    if message is None:
        assert [t["label"] for t in mig_targets(H200_MIG, selection)] == ["gpu0-gi9", "gpu0-gi10"]
        return
    with pytest.raises(PlanInputError, match=re.escape(message)):
        mig_targets(H200_MIG, selection)


def test_a_host_without_mig_instances_is_refused_with_the_fix() -> None:
    with pytest.raises(PlanInputError, match=re.escape("this host has no MIG GPU instance")):
        mig_targets(_facts("h200x1"), "all")


MODEL = {"name": "qwen", "path": "/srv/models/Qwen/Qwen3-0.6B/abc", "port": 8000}


def test_one_unit_per_instance_with_its_own_port_and_key() -> None:
    units = serving_units(
        [{**MODEL, "mig": ["2g.20gb", "1g.10gb"]}, {"name": "other", "path": "/m", "port": 9000}], H100_MIG
    )
    assert [(u["key"], u["port"], u.get("mig_target", {}).get("profile")) for u in units] == [
        ("qwen@gpu0-gi3", 8000, "2g.20gb"),
        ("qwen@gpu0-gi9", 8001, "1g.10gb"),
        ("qwen@gpu0-gi10", 8002, "1g.10gb"),
        ("other", 9000, None),
    ]
    assert {u["name"] for u in units[:3]} == {"qwen"}


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (
            [{**MODEL, "mig": "all"}, {"name": "b", "path": "/m", "port": 8002}],
            "port 8002 is both qwen@gpu0-gi9 and b (qwen takes one port per MIG instance from its port on: "
            "8000-8003)",
        ),
        (
            [{**MODEL, "mig": ["1g.10gb"]}, {**MODEL, "name": "b", "port": 9000, "mig": "all"}],
            "GPU 0 instance 9 (1g.10gb) is also served by qwen",
        ),
        (
            [{**MODEL, "mig": "all", "overrides": {"tensor_parallel_size": 2}}],
            "vllm_server_models[qwen].overrides.tensor_parallel_size is 2",
        ),
        (
            [{**MODEL, "mig": ["7g.80gb"]}],
            "vllm_server_models[qwen]: vllm_server_models[].mig: no GPU instance",
        ),
    ],
)
def test_unit_errors(models: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ServingError, match=re.escape(message)):
        serving_units(models, H100_MIG)


def test_each_container_gets_its_mig_device() -> None:
    target = mig_targets(H200_MIG, ["3g.71gb"])[0]
    assert mig_device_requests(target, "nvidia") == [
        {
            "driver": "nvidia",
            "device_ids": ["MIG-00000001-0000-0000-0000-000000000001"],
            "capabilities": [["gpu"]],
        }
    ]
    assert mig_device_requests(target, "cdi") == [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=0:1"]}]
    with pytest.raises(ServingError, match="nvidia or cdi"):
        mig_device_requests(target, "amd")


def _record(key: str, port: int) -> dict[str, Any]:
    return {"current": {"name": "qwen", "key": key, "listen_address": "10.0.0.5", "port": port}}


def test_the_gateway_routes_the_model_over_every_recorded_instance() -> None:
    hvars = {
        "vllm_server_listen_address": "10.0.0.5",
        "vllm_server_models": [{**MODEL, "mig": "all"}],
        "ansible_facts": {
            "ansible_local": {
                "vllm_fleet": {
                    "models": {
                        "qwen@gpu0-gi3": _record("qwen@gpu0-gi3", 8000),
                        "qwen@gpu0-gi9": _record("", 8001),
                    }
                }
            }
        },
    }
    ends = fleet.endpoints(hvars, host="g1")
    assert [(e["key"], e["server"], e["recorded"]) for e in ends] == [
        ("qwen@gpu0-gi3", "10.0.0.5:8000", True),
        ("qwen@gpu0-gi9", "10.0.0.5:8001", True),
    ]
    routes = gateway.routes([{"host": "g1", "address": "10.0.0.5", "models": ends}])
    assert [(r["model"], [s["server"] for s in r["servers"]]) for r in routes] == [
        ("qwen", ["10.0.0.5:8000", "10.0.0.5:8001"])
    ]


def test_before_a_deployment_the_endpoints_follow_the_gpu_facts() -> None:
    hvars = {
        "vllm_server_listen_address": "10.0.0.5",
        "vllm_server_models": [{**MODEL, "mig": ["1g.10gb"]}],
        "ansible_facts": {"nvidia_gpu": H100_MIG},
    }
    assert [e["server"] for e in fleet.endpoints(hvars)] == ["10.0.0.5:8000", "10.0.0.5:8001"]
    del hvars["ansible_facts"]
    assert [e["server"] for e in fleet.endpoints(hvars)] == ["10.0.0.5:8000"]


def _inventory_problems(models: list[dict[str, Any]], facts: Any = None) -> list[str]:
    key = "backend-key-0123456789abcdef"
    weights = [
        {"name": m["name"], "source": "huggingface", "repo_id": "org/m", "revision": "main"} for m in models
    ]
    hosts = {"g1": {"vllm_fleet_api_key": key, "model_weights_models": weights, "vllm_server_models": models}}
    groups = {"all": ["g1"], "gpu_nodes": ["g1"], "ungrouped": []}
    found, _planned = ic.check_inventory(
        hosts, groups, {"all": ["gpu_nodes"]}, gpu_facts={"g1": facts} if facts else {}
    )
    return [p.line("g1") for p in found]


@pytest.mark.parametrize(
    ("models", "line"),
    [
        (
            [{**MODEL, "mig": "everything"}],
            "g1: vllm_server_models[0].mig: 'everything' is not a MIG selection.",
        ),
        (
            [{**MODEL, "mig": ["1c.3g.40gb"]}],
            "g1: vllm_server_models[0].mig[0]: '1c.3g.40gb' is neither a GPU-instance profile nor a MIG UUID "
            "(it names a compute instance). Fix: write 3g.40gb",
        ),
        (
            [{**MODEL, "mig": ["1g.10gb", "1g.10gb"]}],
            "g1: vllm_server_models[0].mig[1]: 1g.10gb is listed twice. Fix: list it once",
        ),
        (
            [{**MODEL, "mig": "all", "overrides": {"tensor_parallel_size": 2}}],
            "g1: vllm_server_models[0].overrides.tensor_parallel_size: is 2, but qwen is served on MIG "
            "instances",
        ),
        (
            [{**MODEL, "mig": ["2g.20gb", "3g.40gb"]}, {"name": "b", "path": "/m", "port": 8001}],
            "g1: vllm_server_models[1].port: 8001 is inside 8000-8001, the ports qwen takes on its 2 MIG "
            "instances",
        ),
    ],
)
def test_inventory_errors_are_one_line(models: list[dict[str, Any]], line: str) -> None:
    lines = _inventory_problems(models)
    assert any(text.startswith(line) for text in lines), lines


def test_the_validate_stage_resolves_instances_from_cached_facts() -> None:
    lines = _inventory_problems(
        [{**MODEL, "mig": ["1g.10gb"]}, {"name": "b", "path": "/m", "port": 8001}], H100_MIG
    )
    assert any("port 8001 is both qwen@gpu0-gi10 and b" in text for text in lines), lines
    assert _inventory_problems([{**MODEL, "mig": ["1g.10gb"]}], H100_MIG) == []
