"""fleet_monitoring_dcgm_hosts(hosts, hostvars): GPU hosts that run the DCGM exporter.

A thin shim over plugins/plugin_utils/fleet_monitoring/targets.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_monitoring import targets


class FilterModule:
    """The GPU hosts that run the DCGM exporter."""

    def filters(self) -> dict[str, Any]:
        return {"fleet_monitoring_dcgm_hosts": targets.dcgm_hosts}
