"""fleet_rollout_latency_gate(measurements, baseline, factor, floor): readiness latency vs the baseline.

A thin shim over plugins/plugin_utils/fleet_rollout/gates.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import gates


class FilterModule:
    """Compare readiness latencies with the recorded baseline."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_latency_gate": gates.latency_gate})
