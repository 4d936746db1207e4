"""fleet_rollout_plan(members, group_order, models_by_host, min_available, allow_downtime): hosts and batches.

A thin shim over plugins/plugin_utils/fleet_rollout/plan.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import plan


class FilterModule:
    """Order the hosts of a rollout group by group and cut each group into batches."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_plan": plan.rollout_plan})
