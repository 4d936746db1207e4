"""The sleep controller wired into a host (#28, fleet_serving/sleep_host.py): the models that may sleep share
one GPU set, their vLLMs move to loopback ports behind the controller, which takes their public ports, and
its config is rendered from real plans. A host where no model sleeps gets nothing new."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.filter.vllm_serving_sleep_host import FilterModule
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import (
    ServingError,
    assign_gpu_sets,
    vllm_command,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep_control import (
    Model,
    make_room,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep_host import sleep_host

ROOT = Path(__file__).resolve().parents[4] / "data"
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1, "compute_capability": "9.0"}
SETTINGS = {
    "listen_address": "10.0.0.5",
    "network_mode": "host",
    "controller_port": 9190,
    "backend_offset": 10000,
    "idle_seconds": 600,
    "wake_timeout": 600,
    "container": "vllm-sleepd",
    "dir": "/usr/local/lib/vllm-fleet/sleepd",
}


def _plan(name: str, gmu: float) -> dict[str, Any]:
    config = json.loads((ROOT / "model-configs" / name / "config.json").read_text())
    return plan(config, H100, options={"vllm_version": "0.32.0", "gpu_memory_utilization": gmu})


PLANS = {
    "qwen": _plan("Qwen__Qwen3-8B", 0.8),
    "llama": _plan("meta-llama__Meta-Llama-3.1-8B", 0.8),
    "always": _plan("Qwen__Qwen3-8B", 0.5),
}
MODELS = [
    {"name": "always", "port": 8000},
    {"name": "qwen", "port": 8001, "sleep": 1},
    {"name": "llama", "port": 8002, "sleep": 2},
]


def test_no_sleeper_no_controller_and_gpu_sets_as_before() -> None:
    models = [{"name": "a", "port": 8000}, {"name": "b", "port": 8001, "sleep": False}]
    assert sleep_host(models, PLANS, SETTINGS) == {}
    # the filter the role calls: the same, and the GPU sets unchanged by the sleep key
    filters = FilterModule().filters()
    assert filters["vllm_serving_sleep_host"](models, PLANS, SETTINGS) == {}
    requests = [{"name": "a", "count": 1, "sleep": None}, {"name": "b", "count": 2, "gpus": None}]
    assert assign_gpu_sets(requests, 4) == {"a": [0], "b": [2, 3]}
    with pytest.raises(ServingError, match="GPU 0 is in"):
        assign_gpu_sets([{"name": "a", "gpus": [0]}, {"name": "b", "gpus": [0]}], 2)


def test_sleepers_share_one_gpu_set() -> None:
    requests = [
        {"name": "always", "count": 1, "gpus": None},
        {"name": "qwen", "count": 1, "gpus": None, "sleep": 1},
        {"name": "llama", "count": 1, "gpus": None, "sleep": 2},
    ]
    assert assign_gpu_sets(requests, 2) == {"always": [0], "qwen": [1], "llama": [1]}
    # one of them names the GPU: both go there, the always-awake model elsewhere
    requests[2]["gpus"] = [0]
    assert assign_gpu_sets(requests, 2) == {"always": [1], "qwen": [0], "llama": [0]}
    requests[1]["gpus"] = [1]
    with pytest.raises(ServingError, match="list the same GPUs for qwen, llama"):
        assign_gpu_sets(requests, 2)
    requests[1]["gpus"], requests[1]["count"] = None, 2
    with pytest.raises(ServingError, match="different numbers of GPUs"):
        assign_gpu_sets(requests, 4)


def test_ports_move_behind_the_controller() -> None:
    got = sleep_host(MODELS, PLANS, SETTINGS)
    assert got["models"] == ["qwen", "llama"]
    assert got["backends"] == {
        "qwen": {"host": "127.0.0.1", "port": 18001, "url": "http://127.0.0.1:18001"},
        "llama": {"host": "127.0.0.1", "port": 18002, "url": "http://127.0.0.1:18002"},
    }
    config = got["config"]
    # the controller on the public ports of the host's listen address, its own metrics on 9190
    assert (config["listen"], config["port"], config["api_key"]) == ("10.0.0.5", 9190, "")
    assert [(m["name"], m["port"], m["backend"], m["level"]) for m in config["models"]] == [
        ("qwen", 8001, "http://127.0.0.1:18001", 1),
        ("llama", 8002, "http://127.0.0.1:18002", 2),
    ]
    assert config["idle_seconds"] == 600.0 and config["wake_timeout"] == 600.0
    assert got["container"] == {
        "name": "vllm-sleepd",
        "dir": "/usr/local/lib/vllm-fleet/sleepd",
        "mount": "/opt/vllm-fleet-sleepd",
        "command": ["/opt/vllm-fleet-sleepd/vllm_fleet_sleepd.py", "/opt/vllm-fleet-sleepd/sleepd.json"],
        "url": "http://10.0.0.5:9190",
    }
    # the vLLM command the role renders with the moved address: loopback, never the public port
    backend = got["backends"]["qwen"]
    command = vllm_command("/srv/m/q", "qwen", backend["host"], backend["port"], PLANS["qwen"]["vllm_args"])
    assert command[command.index("--host") + 1 :][:3] == ["127.0.0.1", "--port", "18001"]
    assert "8001" not in command


def test_budget_from_real_plans_holds_one_awake() -> None:
    config = sleep_host(MODELS, PLANS, SETTINGS)["config"]
    sizes = {m["name"]: m["bytes"] for m in config["models"]}
    budget = config["budget_bytes"]
    # the always-awake model is on GPUs of its own: only what the sleepers keep asleep comes off
    assert max(sizes.values()) <= budget < sum(sizes.values())
    views = [Model("qwen", sizes["qwen"], True, 0, 1.0), Model("llama", sizes["llama"], False)]
    room = make_room(views, "llama", budget)
    assert room.sleep == ("qwen",) and room.fits


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"controller_port": 8001}, r"controller_port 8001 is also the port of vllm_server_models\[qwen\]"),
        ({"backend_offset": 1}, r"127.0.0.1:8002 .* which vllm_server_models\[llama\] uses"),
        ({"backend_offset": 60000}, "outside 1-65535"),
        ({"backend_offset": 1189}, "which the controller uses"),
        ({"network_mode": "bridge"}, "needs their network namespace"),
        ({"serving_group": True}, "member of a serving group"),
    ],
)
def test_refusals_name_the_variable(change: dict[str, Any], match: str) -> None:
    with pytest.raises(ServingError, match=match):
        sleep_host(MODELS, PLANS, SETTINGS | change)


def test_awake_set_must_fit_and_mig_and_level_refused() -> None:
    # each alone at 0.99 of the GPU: one awake beside the other's CUDA context and graphs does not fit
    full = {"qwen": _plan("Qwen__Qwen3-8B", 0.99), "llama": _plan("meta-llama__Meta-Llama-3.1-8B", 0.99)}
    with pytest.raises(ServingError, match="the models allowed awake at once do not fit their GPUs"):
        sleep_host(MODELS[1:], full, SETTINGS)
    assert sleep_host(MODELS[1:2], full, SETTINGS)["awake"]["fits"]  # alone it fits
    with pytest.raises(ServingError, match="sleep and mig together"):
        sleep_host([{"name": "qwen", "port": 8001, "sleep": 1, "mig": ["3g.40gb"]}], PLANS, SETTINGS)
    with pytest.raises(ServingError, match="must be 1"):
        sleep_host([{"name": "qwen", "port": 8001, "sleep": 3}], PLANS, SETTINGS)
    with pytest.raises(ServingError, match="no plan for ghost"):
        sleep_host([{"name": "ghost", "port": 8001, "sleep": 1}], PLANS, SETTINGS)
