"""vllm_serving_stale_start_caches(found, containers, fact, images): the cache folders no container needs.

A thin shim over plugins/plugin_utils/fleet_serving/start_cache.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, start_cache


class FilterModule:
    """The cache folders of images no container on the host uses any more."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"vllm_serving_stale_start_caches": start_cache.stale_caches}, deploy.ServingError
        )
