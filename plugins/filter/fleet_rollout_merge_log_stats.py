"""fleet_rollout_merge_log_stats(parts): gateway log stats of several gateways.

A thin shim over plugins/module_utils/gateway_access_log.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import gateway_access_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """Sum the access log stats of several gateways."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_merge_log_stats": gateway_access_log.merge_stats})
