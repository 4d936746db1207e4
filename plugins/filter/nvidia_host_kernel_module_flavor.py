"""nvidia_host_kernel_module_flavor(requested, gpus, branch, installed): open or proprietary modules.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """Open or proprietary NVIDIA kernel modules for a host."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_kernel_module_flavor": nvidia_host.kernel_module_flavor},
            nvidia_host.NvidiaHostError,
        )
