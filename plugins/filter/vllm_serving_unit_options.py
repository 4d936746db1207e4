"""vllm_serving_unit_options(model, release, group_options, features, lora, draft_config, group_members):
the planner options of one served model, every layer merged in one place.

A thin shim over plugins/plugin_utils/fleet_serving/unit.py, which plan.yml and the doctor call too.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.errors import PlanInputError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, unit


class FilterModule:
    """A served model's planner options."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"vllm_serving_unit_options": unit.unit_options}, (deploy.ServingError, PlanInputError)
        )
