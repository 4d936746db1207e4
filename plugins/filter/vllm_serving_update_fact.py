"""vllm_serving_update_fact(existing, records, now): the vllm_fleet local fact after a deployment.

A thin shim over plugins/plugin_utils/fleet_serving/deploy.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """The vllm_fleet local fact after a deployment."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_update_fact": deploy.update_deployments}, deploy.ServingError)
