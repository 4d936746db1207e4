"""gateway_affinity_routes(routes, default, models): the routes that pin a session key to a replica.

A thin shim over plugins/plugin_utils/fleet_serving/gateway.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, gateway


class FilterModule:
    """The gateway routes that pin a session key to one replica (cache affinity)."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"gateway_affinity_routes": gateway.affinity_routes}, deploy.ServingError)
