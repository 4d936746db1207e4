"""The planner as the plan report and the doctor call it: fleet_planner.plan and its GPU description, given
the inputs they hold (a safetensors index, a weights size in bytes, a host's nvidia_gpu facts).

Pure Python (standard library only). The filters vllm_fleet_plan_report and vllm_fleet_doctor pass these
to plan_report.build_report and doctor.evaluate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import fleet_planner


def plan(
    config: Mapping[str, Any],
    gpu: Mapping[str, Any],
    options: Mapping[str, Any],
    index: Any,
    weights_bytes: Any,
) -> dict[str, Any]:
    """The plan of a model (its config.json) on ``gpu`` with ``options``."""
    return fleet_planner.plan(
        config,
        gpu,
        safetensors_index=index,
        weights_bytes=int(weights_bytes) if weights_bytes else None,
        options=options,
    )


def gpu_spec(facts: Mapping[str, Any], nodes: int, shared: bool) -> dict[str, Any]:
    """The planner's GPU description of a host's nvidia_gpu facts."""
    return fleet_planner.gpu_spec_from_facts(facts, nodes=nodes, shared=shared)


def doctor_planner(
    config: Mapping[str, Any],
    facts: Mapping[str, Any],
    options: Mapping[str, Any],
    inputs: Mapping[str, Any],
) -> Mapping[str, Any]:
    """The plan the doctor checks a host against: ``inputs`` holds the nodes, the model's GPUs, the
    safetensors index and the weights' size its probe read."""
    gpu = fleet_planner.gpu_spec_from_facts(
        facts, nodes=int(inputs.get("nodes") or 1), gpus=inputs.get("gpus")
    )
    return plan(config, gpu, options, inputs.get("safetensors_index"), inputs.get("weights_bytes"))
