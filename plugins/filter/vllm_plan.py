"""Planner filters: thin shims over plugin_utils/fleet_planner (documented in the sidecar YAML files).

vllm_fleet_plan(model_config, gpu, options, safetensors_index, weights_bytes)  the launch plan
vllm_fleet_gpu_spec(nvidia_gpu_facts, nodes, shared, gpus)                     planner GPU dict from facts
vllm_fleet_mig_gpu_spec(mig_target)                                           planner GPU dict, MIG instance
vllm_fleet_mig_refusal(mig_target, model, errors)                             why a model misses an instance
vllm_fleet_plan_options(vllm_version, group_options, model_options, model_name) one model's planner options
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import mig


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def vllm_fleet_plan(
    model_config: Any, gpu: Any, options: Any = None, safetensors_index: Any = None, weights_bytes: Any = None
) -> dict[str, Any]:
    """Plan vLLM launch parameters; see vllm_fleet_plan.yml."""
    try:
        if weights_bytes is not None and not isinstance(weights_bytes, bool):
            weights_bytes = int(weights_bytes)
        return fleet_planner.plan(
            model_config,
            gpu,
            safetensors_index=safetensors_index,
            weights_bytes=weights_bytes,
            options=options,
        )
    except (fleet_planner.PlanInputError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(
            f"vllm_fleet_plan: {exc} (gpu={_short(gpu)}, options={_short(options)})"
        ) from exc


def vllm_fleet_gpu_spec(
    nvidia_gpu_facts: Any, nodes: Any = 1, shared: Any = False, gpus: Any = None
) -> dict[str, Any]:
    """The planner's gpu dict from `ansible_facts.nvidia_gpu`; see vllm_fleet_gpu_spec.yml."""
    try:
        if isinstance(shared, str):
            if shared.strip().lower() not in ("true", "yes", "1", "false", "no", "0", ""):
                raise ValueError(f"shared: expected a boolean, got {shared!r}")
            shared = shared.strip().lower() in ("true", "yes", "1")
        n = int(nodes)
        if n < 1:
            raise ValueError(f"nodes: must be >= 1, got {nodes!r}")
        return fleet_planner.gpu_spec_from_facts(nvidia_gpu_facts, nodes=n, shared=bool(shared), gpus=gpus)
    except (fleet_planner.PlanInputError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_gpu_spec: {exc} (value={_short(nvidia_gpu_facts)})") from exc


def vllm_fleet_mig_gpu_spec(mig_target: Any) -> dict[str, Any]:
    """The planner's gpu dict of one MIG GPU instance; see vllm_fleet_mig_gpu_spec.yml."""
    try:
        return mig.mig_gpu_spec(mig_target)
    except (fleet_planner.PlanInputError, TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_mig_gpu_spec: {exc} (value={_short(mig_target)})") from exc


def vllm_fleet_mig_refusal(mig_target: Any, model: Any, errors: Any = None) -> str:
    """One line: why a model does not fit a MIG instance, and the fix; see vllm_fleet_mig_refusal.yml."""
    return mig.mig_refusal(mig_target, str(model), errors)


def vllm_fleet_plan_options(
    vllm_version: Any, group_options: Any = None, model_options: Any = None, model_name: Any = None
) -> dict[str, Any]:
    """One model's planner options from the fleet's layers; see vllm_fleet_plan_options.yml."""
    try:
        return fleet_planner.merge_plan_options(vllm_version, group_options, model_options, model_name)
    except fleet_planner.PlanInputError as exc:
        raise AnsibleFilterError(
            f"vllm_fleet_plan_options: {exc} (group_options={_short(group_options)}, "
            f"model_options={_short(model_options)})"
        ) from exc


class FilterModule:
    """vLLM launch planning."""

    def filters(self) -> dict[str, Any]:
        return {
            "vllm_fleet_plan": vllm_fleet_plan,
            "vllm_fleet_gpu_spec": vllm_fleet_gpu_spec,
            "vllm_fleet_mig_gpu_spec": vllm_fleet_mig_gpu_spec,
            "vllm_fleet_mig_refusal": vllm_fleet_mig_refusal,
            "vllm_fleet_plan_options": vllm_fleet_plan_options,
        }
