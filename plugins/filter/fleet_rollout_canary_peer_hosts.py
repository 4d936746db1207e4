"""fleet_rollout_canary_peer_hosts(plan, host, unit, models_by_host, models, limit): hosts of the live peers.

A thin shim over plugins/plugin_utils/fleet_rollout/canary_analysis.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import canary_analysis


class FilterModule:
    """The hosts a canary's models are compared with (still on the version before)."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_canary_peer_hosts": canary_analysis.canary_peer_hosts})
