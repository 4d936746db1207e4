"""Filters for the monitoring roles: thin shims over plugin_utils/fleet_monitoring.

fleet_monitoring_vllm_targets(hosts, hostvars, groups, ...)  static_configs for every vLLM /metrics
fleet_monitoring_host_targets(hosts, hostvars, port, ...)    static_configs for a per-host exporter
fleet_monitoring_hosts_without_models(hosts, hostvars)       GPU hosts declaring no models
fleet_monitoring_dcgm_hosts(hosts, hostvars)                GPU hosts that run the DCGM exporter
fleet_monitoring_sleep_targets(hosts, hostvars)             static_configs for each host's sleep controller
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets


class FilterModule:
    """Prometheus scrape targets from the inventory."""

    def filters(self) -> dict[str, Any]:
        checked = {
            "fleet_monitoring_vllm_targets": targets.vllm_targets,
            "fleet_monitoring_host_targets": targets.host_targets,
            "fleet_monitoring_sleep_targets": targets.sleep_controller_targets,
        }
        return {
            **wrap_filters(checked, targets.TargetError),
            "fleet_monitoring_hosts_without_models": targets.hosts_without_models,
            "fleet_monitoring_dcgm_hosts": targets.dcgm_hosts,
        }
