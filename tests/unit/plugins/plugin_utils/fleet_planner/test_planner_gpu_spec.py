"""The planner's GPU description from the nvidia_gpu facts: one GPU model per plan, mixed hosts refused."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import PlanInputError, plan
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.gpu import (
    gpu_spec_from_facts,
)
from nvidia_smi_profiles import PROFILES_DIR, capture
from planner_helpers import config


def _facts(*profiles: str) -> dict[str, Any]:
    """One host holding the GPUs of real -q reports, in order (an L4 and two A40s, say)."""
    texts = [capture(p, "-q") or "" for p in profiles]
    body = texts[0].rstrip("\n") + "".join(t[t.index("\nGPU 0000") :] for t in texts[1:])
    return nvidia_smi.build_facts(nvidia_smi.parse_query(body))


MIXED = _facts("l4x1", "a10x1", "a10x1")


def test_a_mixed_host_is_refused_naming_the_gpus_of_each_model() -> None:
    with pytest.raises(PlanInputError) as err:
        gpu_spec_from_facts(MIXED)
    assert str(err.value) == (
        "mixed GPU host (GPU 0: NVIDIA L4 (23034 MiB); GPUs 1-2: NVIDIA A10 (23028 MiB)): plan each model on "
        "one GPU model - set the model's gpus (vllm_server_models[].gpus) to GPUs of one model, e.g. [0]"
    )


@pytest.mark.parametrize(
    ("gpus", "name", "count", "cc"), [([0], "NVIDIA L4", 1, "8.9"), ([1, 2], "NVIDIA A10", 2, "8.6")]
)
def test_the_gpus_of_one_model_are_planned(gpus: list[int], name: str, count: int, cc: str) -> None:
    spec = gpu_spec_from_facts(MIXED, gpus=gpus)
    assert (spec["name"], spec["count"], spec["compute_capability"], spec["mixed"]) == (name, count, cc, True)
    assert spec["models"] == {"NVIDIA L4": 1, "NVIDIA A10": 2} and spec["excluded"] == []
    assert plan(config("Qwen__Qwen3-0.6B"), spec)["feasible"]


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        ([0, 1], "mixed GPU host (GPU 0: NVIDIA L4 (23034 MiB); GPU 1: NVIDIA A10 (23028 MiB))"),
        ([3, 7], "gpus: no GPUs 3, 7 on this host (it has GPUs 0-2)"),
        ("0", "gpus: expected a list of GPU indexes"),
    ],
)
def test_bad_gpu_selections(gpus: object, message: str) -> None:
    with pytest.raises(PlanInputError, match=re.escape(message)):
        gpu_spec_from_facts(MIXED, gpus=gpus)


def test_a_real_mixed_table_host() -> None:
    """Five GPUs of four models (a public nvidia-smi table, read through the table fallback)."""
    text = (PROFILES_DIR / "captures" / "mixed-rtx-5gpu-table" / "nvidia-smi.txt").read_text()
    facts = nvidia_smi.facts_from_results({"query": (2, "", "no -q"), "table": (0, text, "")})
    with pytest.raises(PlanInputError) as err:
        gpu_spec_from_facts(facts)
    assert str(err.value).startswith(
        "mixed GPU host (GPU 0: NVIDIA GeForce RTX 2060 (6144 MiB); GPUs 1-2: NVIDIA GeForce RTX 3060 "
        "(12288 MiB); GPU 3: NVIDIA GeForce RTX 3060 Ti (8192 MiB); "
        "GPU 4: NVIDIA GeForce RTX 3070 (8192 MiB))"
    )
    spec = gpu_spec_from_facts(facts, gpus=[1, 2])
    assert (spec["name"], spec["count"], spec["memory_mib"], spec["compute_capability"]) == (
        "NVIDIA GeForce RTX 3060",
        2,
        12288,
        "8.6",
    )


def test_a_homogeneous_host_needs_no_selection() -> None:
    spec = gpu_spec_from_facts(nvidia_smi.build_facts(nvidia_smi.parse_query(capture("h100x8", "-q") or "")))
    assert (spec["name"], spec["count"], spec["mixed"]) == ("NVIDIA H100 80GB HBM3", 8, False)


def test_mig_gpus_selected_alone_are_refused_with_the_fix() -> None:
    facts = nvidia_smi.build_facts(nvidia_smi.parse_query(capture("h200x1-mig", "-q") or ""))
    with pytest.raises(PlanInputError, match=re.escape("GPU 0 in MIG mode: vLLM is planned on whole GPUs")):
        gpu_spec_from_facts(facts)
