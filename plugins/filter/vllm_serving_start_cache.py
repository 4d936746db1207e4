"""Filters for vLLM's compile and kernel caches on the host: thin shims over
plugins/plugin_utils/fleet_serving/start_cache.py.

vllm_serving_start_caches(specs, images, root, vllm_version)  per image its folder and kernel step, per
                                                 container its cache mount and environment
vllm_serving_stale_start_caches(found, containers, fact, images)  the cache folders no container needs
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, start_cache


class FilterModule:
    """vLLM's start caches."""

    def filters(self) -> dict[str, Any]:
        table = {
            "vllm_serving_start_caches": start_cache.start_caches,
            "vllm_serving_stale_start_caches": start_cache.stale_caches,
        }
        return wrap_filters(table, deploy.ServingError)
