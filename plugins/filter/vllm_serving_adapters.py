"""vllm_serving_adapters(models, root): every LoRA adapter of a host's models, flat, with its path.

A thin shim over plugins/plugin_utils/fleet_serving/lora.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, lora


class FilterModule:
    """Every LoRA adapter of a host's served models, flat, with where its verified copy is."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_adapters": lora.adapters}, deploy.ServingError)
