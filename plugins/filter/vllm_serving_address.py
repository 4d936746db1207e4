"""vllm_serving_address(hostvars[host]): the address vLLM listens on unless recorded (the default).

A thin shim over plugins/plugin_utils/fleet_serving/fleet.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, fleet


class FilterModule:
    """The address a host's vLLM listens on when no deployment is recorded."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_address": fleet.vllm_address}, deploy.ServingError)
