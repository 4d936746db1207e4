"""fleet_rollout_vllm_load(metrics_text, model): requests running/waiting on a vLLM server.

A thin shim over plugins/plugin_utils/fleet_rollout/metrics.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import metrics


class FilterModule:
    """Requests running and waiting on a vLLM server, from its /metrics text."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_vllm_load": metrics.vllm_load})
