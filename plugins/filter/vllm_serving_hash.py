"""vllm_serving_hash(value): short stable sha256 of any data (the args hash).

A thin shim over plugins/plugin_utils/fleet_serving/deploy.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """A short, stable sha256 of any data."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_hash": deploy.stable_hash}, deploy.ServingError)
