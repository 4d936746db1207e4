"""fleet_rollout_unit_restarts(unit, rollbacks, unchanged): a member's models restarted with its group.

A thin shim over plugins/plugin_utils/fleet_rollout/units.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import units


class FilterModule:
    """The models of a serving group member restarted at their recorded version with the members restored."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_unit_restarts": units.unit_restarts})
