"""vllm_serving_kv_cache(log_text): KV-cache figures vLLM printed at its last start.

A thin shim over plugins/module_utils/vllm_log.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """The KV-cache figures vLLM printed at its last start."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_kv_cache": vllm_log.parse_kv_cache}, deploy.ServingError)
