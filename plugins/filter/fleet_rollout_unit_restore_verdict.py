"""fleet_rollout_unit_restore_verdict(host, unit, errors): does a host go back in service.

A thin shim over plugins/plugin_utils/fleet_rollout/units.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import units


class FilterModule:
    """Whether a host goes back in service after the restore of its unit."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_unit_restore_verdict": units.restore_verdict})
