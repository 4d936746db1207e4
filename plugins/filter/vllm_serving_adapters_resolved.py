"""vllm_serving_adapters_resolved(adapters, commits): adapters pointed at the commits their refs name.

A thin shim over plugins/plugin_utils/fleet_serving/lora.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, lora


class FilterModule:
    """LoRA adapters pointed at the commits their branch or tag resolved to."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_adapters_resolved": lora.resolve}, deploy.ServingError)
