"""fleet_rollout_default_group(group_names, groups, gpu_group): a host's rollout group.

A thin shim over plugins/plugin_utils/fleet_rollout/plan.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import plan


class FilterModule:
    """'The rollout group of a host: its smallest inventory group made only of GPU hosts'."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_default_group": plan.default_group})
