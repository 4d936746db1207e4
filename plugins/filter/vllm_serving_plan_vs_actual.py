"""vllm_serving_plan_vs_actual(plan, actual): planned vs measured KV figures with the error.

A thin shim over plugins/module_utils/vllm_log.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """Planned and measured KV-cache figures side by side."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_plan_vs_actual": vllm_log.plan_vs_actual}, deploy.ServingError)
