"""vllm_serving_command(path, name, host, port, planned_args, extra_args, stop_timeout, vllm_version,
lora_modules): the `vllm serve` arguments.

A thin shim over plugins/plugin_utils/fleet_serving/deploy.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """The vllm serve arguments of one model."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_command": deploy.vllm_command}, deploy.ServingError)
