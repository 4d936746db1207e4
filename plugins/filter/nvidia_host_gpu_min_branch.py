"""nvidia_host_gpu_min_branch(gpus): oldest branch all GPUs run on.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """The oldest driver branch that every GPU of a list runs on."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_gpu_min_branch": nvidia_host.gpu_min_branch}, nvidia_host.NvidiaHostError
        )
