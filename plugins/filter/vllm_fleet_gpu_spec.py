"""vllm_fleet_gpu_spec(nvidia_gpu_facts, nodes, shared, gpus): planner GPU dict from facts.

A thin shim over plugins/plugin_utils/fleet_planner/gpu.py (gpu_spec_from_values).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import short_repr
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import gpu


def vllm_fleet_gpu_spec(
    nvidia_gpu_facts: Any, nodes: Any = 1, shared: Any = False, gpus: Any = None
) -> dict[str, Any]:
    """The planner's gpu dict from `ansible_facts.nvidia_gpu`; see vllm_fleet_gpu_spec.yml."""
    try:
        return gpu.gpu_spec_from_values(nvidia_gpu_facts, nodes, shared, gpus)
    except (fleet_planner.PlanInputError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(
            f"vllm_fleet_gpu_spec: {exc} (value={short_repr(nvidia_gpu_facts)})"
        ) from exc


class FilterModule:
    """Planner GPU description from the nvidia_gpu facts."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_gpu_spec": vllm_fleet_gpu_spec}
