"""fleet_monitoring_vllm_targets(hosts, hostvars, groups, ...): static_configs for every vLLM /metrics.

A thin shim over plugins/plugin_utils/fleet_monitoring/targets.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets


class FilterModule:
    """Prometheus static_configs for every vLLM /metrics endpoint of the fleet."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_monitoring_vllm_targets": targets.vllm_targets}, targets.TargetError)
