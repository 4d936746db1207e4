"""gateway_clients(keys, tiers): client keys as {name, sha256, tier}.

A thin shim over plugins/plugin_utils/fleet_serving/gateway.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, gateway


class FilterModule:
    """Client API keys as name, sha256 and tier."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"gateway_clients": gateway.clients}, deploy.ServingError)
