"""fleet_rollout_restore_plan(before, fact, running, declared): what a failed host needs restored.

A thin shim over plugins/plugin_utils/fleet_rollout/gates.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import gates


class FilterModule:
    """What a host needs so that every model runs the version it ran before a failed change."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_restore_plan": gates.restore_plan})
