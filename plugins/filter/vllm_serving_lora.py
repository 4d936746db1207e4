"""vllm_serving_lora(adapters, adapter_configs, vllm_version, root): per model: LoRA options, modules, mounts.

A thin shim over plugins/plugin_utils/fleet_serving/lora.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, lora


class FilterModule:
    """The vLLM launch of the LoRA adapters of each served model."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_lora": lora.launch}, deploy.ServingError)
