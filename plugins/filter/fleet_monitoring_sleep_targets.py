"""fleet_monitoring_sleep_targets(hosts, hostvars): static_configs for each host's sleep controller.

A thin shim over plugins/plugin_utils/fleet_monitoring/targets.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets


class FilterModule:
    """Prometheus static_configs for the sleep controller of each host whose models may sleep."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"fleet_monitoring_sleep_targets": targets.sleep_controller_targets}, targets.TargetError
        )
