"""fleet_rollout_unit(units, host): the hosts replaced and restored with a host.

A thin shim over plugins/plugin_utils/fleet_rollout/units.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import units


class FilterModule:
    """The hosts replaced, gated and restored together with a host - its serving group, rank 0 first."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_unit": units.unit_of})
