"""The sleep controller's budget from real plans (#28): what awake_check lets through is what the controller
keeps awake at most."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep import awake_check
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep_control import (
    Model,
    make_room,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep_plan import (
    sleep_budget,
)

ROOT = Path(__file__).resolve().parents[4] / "data"
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1, "compute_capability": "9.0"}


def _plan(name: str, gmu: float) -> dict[str, Any]:
    config = json.loads((ROOT / "model-configs" / name / "config.json").read_text())
    return plan(config, H100, options={"vllm_version": "0.32.0", "gpu_memory_utilization": gmu})


def test_room_for_one_of_two_sleepers() -> None:
    plans = {"a": _plan("Qwen__Qwen3-8B", 0.8), "b": _plan("meta-llama__Meta-Llama-3.1-8B", 0.8)}
    models = [{"name": "a", "sleep": 1}, {"name": "b", "sleep": 2}]
    awake_check(models, plans, 1)  # the plan allows one awake
    got = sleep_budget(models, plans)
    a, b, budget = got["bytes"]["a"], got["bytes"]["b"], got["budget_bytes"]
    assert max(a, b) <= budget < a + b
    # the controller then never has both awake: waking b puts a to sleep
    room = make_room([Model("a", a, True, 0, 1.0), Model("b", b, False)], "b", budget)
    assert room.sleep == ("a",) and room.fits


def test_a_model_without_sleep_takes_its_share_off_the_budget() -> None:
    plans = {"a": _plan("Qwen__Qwen3-8B", 0.4), "b": _plan("meta-llama__Meta-Llama-3.1-8B", 0.4)}
    alone = sleep_budget([{"name": "b", "sleep": 1}], plans)["budget_bytes"]
    shared = sleep_budget([{"name": "a"}, {"name": "b", "sleep": 1}], plans)["budget_bytes"]
    gpu = plans["a"]["per_gpu"]["total_bytes"]
    assert alone - shared == int(0.4 * gpu)


def test_no_plan() -> None:
    with pytest.raises(ServingError, match="no plan for b"):
        sleep_budget([{"name": "b", "sleep": 1}], {})
