"""vllm_serving_endpoints(hostvars[host], models, host): each model's recorded (else default) address, url.

A thin shim over plugins/plugin_utils/fleet_serving/fleet.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, fleet


class FilterModule:
    """Each model of a host with where its vLLM is served."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_endpoints": fleet.endpoints}, deploy.ServingError)
