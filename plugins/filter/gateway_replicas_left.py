"""gateway_replicas_left(models_by_host, drained, host, minimum): models a drain would leave short.

A thin shim over plugins/plugin_utils/fleet_serving/gateway.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, gateway


class FilterModule:
    """The models a drain would leave with too few serving hosts."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"gateway_replicas_left": gateway.replicas_left}, deploy.ServingError)
