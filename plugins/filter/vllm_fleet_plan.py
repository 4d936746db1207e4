"""vllm_fleet_plan(model_config, gpu, options, safetensors_index, weights_bytes): the launch plan.

A thin shim over plugins/plugin_utils/fleet_planner/planner.py (plan).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import short_repr


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
            f"vllm_fleet_plan: {exc} (gpu={short_repr(gpu)}, options={short_repr(options)})"
        ) from exc


class FilterModule:
    """Plan vLLM launch parameters and predict per-GPU memory."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_plan": vllm_fleet_plan}
