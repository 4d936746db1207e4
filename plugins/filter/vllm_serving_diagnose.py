"""vllm_serving_diagnose(log_text): why the last vLLM start failed, with the fix.

A thin shim over plugins/module_utils/vllm_log.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """Why the last vLLM start failed, with the fix."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_diagnose": vllm_log.diagnose_failure}, deploy.ServingError)
