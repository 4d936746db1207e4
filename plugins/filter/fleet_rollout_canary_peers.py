"""fleet_rollout_canary_peers(endpoints_by_host, models, limit): the live peers a canary is compared with.

A thin shim over plugins/plugin_utils/fleet_rollout/canary_analysis.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import canary_analysis


class FilterModule:
    """The live peers a canary of each model is compared with."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_canary_peers": canary_analysis.canary_peers})
