"""vllm_serving_mig_device_requests(target, driver): Docker device requests for one MIG instance.

A thin shim over plugins/plugin_utils/fleet_serving/mig.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, mig


class FilterModule:
    """Docker device requests giving a container one MIG device."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"vllm_serving_mig_device_requests": mig.mig_device_requests}, deploy.ServingError
        )
