"""vllm_serving_start_caches(specs, images, root, vllm_version): per image its folder and kernel step, per
container its cache mount and environment.

A thin shim over plugins/plugin_utils/fleet_serving/start_cache.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, start_cache


class FilterModule:
    """The host folder of vLLM's compile and kernel caches per image, and each container's mount of it."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_start_caches": start_cache.start_caches}, deploy.ServingError)
