"""vllm_serving_lora_changes(models_body, model, declared): the adapters to load and unload at runtime.

A thin shim over plugins/plugin_utils/fleet_serving/lora.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, lora


class FilterModule:
    """The LoRA adapters to load and unload so that a running vLLM serves the declared ones."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_lora_changes": lora.runtime_changes}, deploy.ServingError)
