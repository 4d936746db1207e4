"""gateway_models(routes): the body of GET /v1/models (adapters with their parent).

A thin shim over plugins/plugin_utils/fleet_serving/gateway.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, gateway


class FilterModule:
    """The body of the gateway's GET /v1/models."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"gateway_models": gateway.models_list}, deploy.ServingError)
