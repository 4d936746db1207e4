"""vllm_serving_host_address(hostvars[host], host): the internal address of a host (exporters, gateways).

A thin shim over plugins/plugin_utils/fleet_serving/fleet.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, fleet


class FilterModule:
    """The internal address of a host (exporters, gateways, Prometheus)."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_host_address": fleet.host_address}, deploy.ServingError)
