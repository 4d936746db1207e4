"""fleet_rollout_unit_stragglers(unit, reached, step): members of a unit that did not pass a step.

A thin shim over plugins/plugin_utils/fleet_rollout/units.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import units


class FilterModule:
    """Members of a serving group that did not pass a step of the rollout."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_unit_stragglers": units.stragglers})
