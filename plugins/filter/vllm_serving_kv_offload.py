"""vllm_serving_kv_offload(models, memtotal_mb, vllm_version, weights, tp, shm): each model's KV tier in RAM.

A thin shim over plugins/plugin_utils/fleet_serving/kv_offload.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, kv_offload


class FilterModule:
    """Each model's KV-cache tier in host RAM, sized from the host's memory."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_kv_offload": kv_offload.kv_offload}, deploy.ServingError)
