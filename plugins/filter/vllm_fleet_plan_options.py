"""vllm_fleet_plan_options(vllm_version, group_options, model_options, model_name): one model's planner
options.

A thin shim over plugins/plugin_utils/fleet_planner/options.py (merge_plan_options).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import short_repr


def vllm_fleet_plan_options(
    vllm_version: Any, group_options: Any = None, model_options: Any = None, model_name: Any = None
) -> dict[str, Any]:
    """One model's planner options from the fleet's layers; see vllm_fleet_plan_options.yml."""
    try:
        return fleet_planner.merge_plan_options(vllm_version, group_options, model_options, model_name)
    except fleet_planner.PlanInputError as exc:
        raise AnsibleFilterError(
            f"vllm_fleet_plan_options: {exc} (group_options={short_repr(group_options)}, "
            f"model_options={short_repr(model_options)})"
        ) from exc


class FilterModule:
    """One served model's planner options, merged from the fleet's layers."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_plan_options": vllm_fleet_plan_options}
