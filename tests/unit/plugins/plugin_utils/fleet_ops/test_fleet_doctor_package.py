"""The doctor package: its public API at the old import path, and the two merges it does in one place."""

from __future__ import annotations

import importlib

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor

# The names of the single-module doctor, importable from the package as before.
PUBLIC = [
    "PASS", "WARN", "FAIL", "SKIP", "ORDER", "GIB", "MIB", "DEFAULT_SETTINGS", "Planner",
    "result", "gib", "model_size",
    "check_disk", "check_ram", "check_shm", "check_ports", "check_cuda", "check_gpu_state",
    "check_topology", "check_time",
    "hub_results", "hub_requests", "evaluate", "summary", "render", "targets",
]  # fmt: skip


def test_public_api() -> None:
    missing = [name for name in PUBLIC if not hasattr(doctor, name)]
    assert not missing
    assert set(PUBLIC) <= set(doctor.__all__)
    assert all(hasattr(doctor, name) for name in doctor.__all__)


def test_check_families_are_modules() -> None:
    families = {
        "storage": ["check_disk", "model_size"],
        "memory": ["check_ram", "check_shm"],
        "network": ["check_ports"],
        "hub": ["hub_requests", "hub_results"],
        "gpu": ["check_gpu_state", "check_cuda", "check_topology"],
        "clock": ["check_time"],
        "report": ["summary", "render"],
        "targets": ["targets"],
        "evaluation": ["evaluate"],
    }
    for module, names in families.items():
        loaded = importlib.import_module(f"{doctor.__name__}.{module}")
        for name in names:
            assert getattr(loaded, name) is getattr(doctor, name), (module, name)


def test_planner_options_order() -> None:
    rec = {"plan_options": {"max_model_len": 4096, "dtype": "auto"}, "vllm_version": "0.32.0"}
    model = {"name": "m", "overrides": {"max_model_len": 8192}}
    assert doctor.planner_options(rec, model) == {
        "max_model_len": 8192,
        "dtype": "auto",
        "vllm_version": "0.32.0",
        "model_name": "m",
    }
    pinned = {"name": "m", "overrides": {"vllm_version": "0.30.0", "model_name": "served"}}
    assert doctor.planner_options(rec, pinned)["vllm_version"] == "0.30.0"
    assert doctor.planner_options(rec, pinned)["model_name"] == "served"
    with pytest.raises(ValueError, match="vllm_server_vllm_version is empty"):
        doctor.planner_options({}, {"name": "m"})  # the serve stage refuses a model with no release


def test_plan_for_passes_the_merged_options() -> None:
    seen = {}

    def planner(config, gpu, options, inputs):
        seen.update(options)
        return {"tensor_parallel_size": 2}

    rec = {
        "plan_options": {"dtype": "bfloat16"},
        "vllm_version": "0.32.0",
        "gpu": {"present": True},
        "probe": {"model_dirs": {"m": {"config": {"architectures": ["X"]}}}},
    }
    model = {"name": "m", "overrides": {"max_num_seqs": 8}}
    assert doctor.plan_for(rec, model, planner) == ({"tensor_parallel_size": 2}, "planned now")
    assert seen == doctor.planner_options(rec, model)


def test_host_settings_order() -> None:
    merged = doctor.host_settings({"settings": {"ram_factor": 2.0}}, {"ram_factor": 1.0, "disk_factor": 3.0})
    assert merged == {**doctor.DEFAULT_SETTINGS, "ram_factor": 2.0, "disk_factor": 3.0}
    assert doctor.host_settings({}) == doctor.DEFAULT_SETTINGS
