"""fleet_monitoring_host_targets(hosts, hostvars, port, ...): static_configs for a per-host exporter.

A thin shim over plugins/plugin_utils/fleet_monitoring/targets.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets


class FilterModule:
    """Prometheus static_configs for an exporter that runs on every host of a list."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_monitoring_host_targets": targets.host_targets}, targets.TargetError)
