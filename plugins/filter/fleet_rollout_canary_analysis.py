"""fleet_rollout_canary_analysis(probe, baseline, factor, ...): the canary vs live peers (else the baseline).

A thin shim over plugins/plugin_utils/fleet_rollout/canary_analysis.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import canary_analysis


class FilterModule:
    """Judge a canary against live peers sampled in the same window (else the recorded baseline)."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_canary_analysis": canary_analysis.canary_analysis})
