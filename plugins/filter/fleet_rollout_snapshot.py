"""fleet_rollout_snapshot(fact): what runs before a change.

A thin shim over plugins/plugin_utils/fleet_rollout/gates.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import gates


class FilterModule:
    """What runs before a change, from the vllm_fleet local fact."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_snapshot": gates.snapshot})
