"""gateway_rate_tiers(tiers): rate-limit tiers as nginx zones.

A thin shim over plugins/plugin_utils/fleet_serving/gateway.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, gateway


class FilterModule:
    """Rate-limit tiers as nginx zones."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"gateway_rate_tiers": gateway.rate_tiers}, deploy.ServingError)
