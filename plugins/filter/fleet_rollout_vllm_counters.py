"""fleet_rollout_vllm_counters(metrics_text, model): vLLM counters a soak compares.

A thin shim over plugins/plugin_utils/fleet_rollout/metrics.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import metrics


class FilterModule:
    """The vLLM counters a canary soak compares."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_vllm_counters": metrics.vllm_counters})
