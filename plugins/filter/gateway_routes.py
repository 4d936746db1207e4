"""gateway_routes(backends, drained): one upstream per model over the hosts serving it.

A thin shim over plugins/plugin_utils/fleet_serving/gateway.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, gateway


class FilterModule:
    """One gateway route per served model over every host serving it."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"gateway_routes": gateway.routes}, deploy.ServingError)
