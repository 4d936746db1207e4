"""The release the fleet deploys by default, and the version each GPU group pins."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report as pr
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.versions import (
    DEFAULT_VLLM_VERSION,
    version_info,
)
from planner_helpers import H200, config

ROOT = Path(__file__).resolve().parents[5]
FLEET = yaml.safe_load((ROOT / "roles/vllm_fleet/defaults/main.yml").read_text())


def test_new_deployments_get_the_newest_release_the_planner_models():
    version = FLEET["vllm_fleet_vllm_version"]
    assert version == DEFAULT_VLLM_VERSION
    assert not version_info(version).extrapolated
    assert FLEET["vllm_fleet_vllm_image"].endswith(f":v{version}")


def test_the_default_release_leaves_gpu_memory_utilization_to_the_extensible_kv_cache():
    cfg = config("Qwen__Qwen3-8B")
    default = plan(cfg, H200, options={"vllm_version": FLEET["vllm_fleet_vllm_version"]})
    assert version_info(FLEET["vllm_fleet_vllm_version"]).extensible
    assert "--gpu-memory-utilization" not in default["vllm_args"]
    # asked for, it is passed
    asked = plan(cfg, H200, options={"vllm_version": "0.34.0", "gpu_memory_utilization": 0.8})
    assert asked["vllm_args"][asked["vllm_args"].index("--gpu-memory-utilization") + 1] == "0.8"


def test_each_gpu_group_is_planned_for_its_own_pinned_version():
    served = [{"name": "m", "path": "/srv/m"}]
    entries = pr.normalize_entries(
        None,
        {"cpu_lab": ["l1"], "h200": ["h1", "h2"]},
        {
            "l1": {"vllm_server_vllm_version": "0.32.0", "vllm_server_models": served},
            "h1": {"vllm_server_models": served},
            "h2": {"vllm_server_models": served},
        },
        {"config_dir": "/c", "vllm_version": FLEET["vllm_fleet_vllm_version"]},
    )
    versions = {e["group"]: e["options"]["vllm_version"] for e in entries}
    assert versions == {"cpu_lab": "0.32.0", "h200": "0.34.0"}
