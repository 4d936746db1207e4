"""nvidia_host_cuda_check(driver_cuda, image_cuda): can the driver run an image built for a CUDA.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """Whether a driver can run an image built for a CUDA version."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"nvidia_host_cuda_check": nvidia_host.cuda_check}, nvidia_host.NvidiaHostError)
