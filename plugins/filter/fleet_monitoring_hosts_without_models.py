"""fleet_monitoring_hosts_without_models(hosts, hostvars): GPU hosts declaring no models.

A thin shim over plugins/plugin_utils/fleet_monitoring/targets.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets


class FilterModule:
    """The hosts that declare no served models."""

    def filters(self) -> dict[str, Any]:
        return {"fleet_monitoring_hosts_without_models": targets.hosts_without_models}
