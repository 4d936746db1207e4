"""nvidia_host_driver_plan(packages, wanted, branch, ...): what the driver role does on a host.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """What the driver role does on one host."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"nvidia_host_driver_plan": nvidia_host.driver_plan}, nvidia_host.NvidiaHostError)
