"""vllm_serving_group_gpu_spec(group, facts_by_host, gpus, shared): the planner GPU dict of a whole group.

A thin shim over plugins/plugin_utils/fleet_serving/groups.py (the planner's
plugins/plugin_utils/fleet_planner/group.py).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, groups


class FilterModule:
    """The planner GPU description of a serving group (N hosts of one GPU type)."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_group_gpu_spec": groups.group_gpu_spec}, deploy.ServingError)
