"""vllm_serving_plan_summary(plan): the planner figures kept in the local fact.

A thin shim over plugins/plugin_utils/fleet_serving/deploy.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """The planner figures kept next to a deployment."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_plan_summary": deploy.plan_summary}, deploy.ServingError)
