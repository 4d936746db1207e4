"""GPU names: the compute capability told from --gpu-name, and names no driver prints (issue #27)."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import cli, plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.errors import PlanInputError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.gpu import GpuSpec
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.gpu_names import (
    KNOWN_GPUS,
    closest_names,
    known_gpu,
)
from planner_helpers import CONFIGS, config


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("nvidia  h100 80gb hbm3", "9.0"),
        ("H100 PCIe", "9.0"),
        ("Tesla T4", "7.5"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("NVIDIA A10", "8.6"),
        ("NVIDIA B200", "10.0"),
    ],
)
def test_capability_is_told_from_a_printed_name(name: str, cc: str) -> None:
    g = GpuSpec.from_any({"name": name, "memory_mib": 81559})
    assert g.compute_capability == cc
    assert g.notes == ()


def test_known_names_are_unique() -> None:
    names = [n.casefold() for n, _cc in KNOWN_GPUS]
    assert len(names) == len(set(names))
    assert known_gpu("NVIDIA H100 80GB") is None


def test_h100_without_capability_is_planned_as_hopper() -> None:
    result = plan(
        config("Qwen__Qwen3-8B"),
        {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 8},
        options={"vllm_version": "0.34.0", "tensor_parallel_size": 8},
    )
    with_cc = plan(
        config("Qwen__Qwen3-8B"),
        {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 8, "compute_capability": "9.0"},
        options={"vllm_version": "0.34.0", "tensor_parallel_size": 8},
    )
    assert result["per_gpu"] == with_cc["per_gpu"]
    assert not any("GPU" in w and "Fix:" in w for w in result["warnings"])


def test_a_name_no_driver_prints_is_refused_with_the_closest_names() -> None:
    with pytest.raises(PlanInputError) as exc:
        GpuSpec.from_any({"name": "NVIDIA H100 80GB", "memory_mib": 81559})
    text = str(exc.value)
    assert text.startswith("gpu.name: 'NVIDIA H100 80GB' (--gpu-name)")
    assert "'NVIDIA H100 80GB HBM3'" in text and "'NVIDIA H100 PCIe'" in text
    assert "Fix: pass --gpu-name exactly as" in text
    assert closest_names("NVIDIA H100 80GB")[0] == "NVIDIA H100 80GB HBM3"


def test_a_name_no_driver_prints_with_a_capability_warns_loudly() -> None:
    result = plan(
        config("Qwen__Qwen3-8B"),
        {"name": "NVIDIA H100 80GB", "memory_mib": 81559, "count": 8, "compute_capability": "9.0"},
        options={"vllm_version": "0.34.0"},
    )
    warning = next(w for w in result["warnings"] if w.startswith("GPU NAME NOT RECOGNIZED"))
    assert "'NVIDIA H100 80GB HBM3'" in warning and "NVSwitch" in warning
    assert "Fix: pass --gpu-name exactly as" in warning


def test_no_name_and_no_capability_warns_loudly() -> None:
    result = plan(config("Qwen__Qwen3-8B"), {"memory_mib": 81559}, options={"vllm_version": "0.34.0"})
    warning = next(w for w in result["warnings"] if w.startswith("GPU UNKNOWN"))
    assert "--gpu-name" in warning and "--compute-capability" in warning and "Fix:" in warning


def test_a_capability_contradicting_the_name_warns() -> None:
    result = plan(
        config("Qwen__Qwen3-8B"),
        {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "8.0"},
        options={"vllm_version": "0.34.0"},
    )
    warning = next(w for w in result["warnings"] if w.startswith("GPU NAME AND CAPABILITY DISAGREE"))
    assert "9.0" in warning and "Fix:" in warning


def test_cli_tells_the_capability_from_the_name(capsys) -> None:
    argv = [
        "--model-config",
        str(CONFIGS / "Qwen__Qwen3-8B" / "config.json"),
        "--gpu-memory-mib",
        "15360",
        "--gpus-per-node",
        "1",
        "--gpu-name",
        "Tesla T4",
        "--vllm-version",
        "0.34.0",
        "--format",
        "table",
    ]
    cli.main(argv)
    out = capsys.readouterr().out
    assert "Tesla T4 (compute capability 7.5) has no bfloat16" in out
