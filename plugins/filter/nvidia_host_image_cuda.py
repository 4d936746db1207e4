"""nvidia_host_image_cuda(config): CUDA version of an image (inspect Config).

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """The CUDA version of a container image."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_image_cuda": nvidia_host.cuda_version_from_image}, nvidia_host.NvidiaHostError
        )
