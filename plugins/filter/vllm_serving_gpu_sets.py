"""vllm_serving_gpu_sets(requests, gpu_count): disjoint GPU sets for the models of one host.

A thin shim over plugins/plugin_utils/fleet_serving/deploy.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """Disjoint GPU sets for the models of one host."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_gpu_sets": deploy.assign_gpu_sets}, deploy.ServingError)
