"""vllm_serving_ready_timeout(weights_bytes, base, per_gib, maximum): readiness timeout in seconds.

A thin shim over plugins/plugin_utils/fleet_serving/deploy.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """Seconds to wait for a new vLLM container to answer."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_ready_timeout": deploy.readiness_timeout}, deploy.ServingError)
