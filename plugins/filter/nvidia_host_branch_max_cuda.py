"""nvidia_host_branch_max_cuda(branch): highest CUDA version a branch supports.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """The highest CUDA version a driver branch supports."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_branch_max_cuda": nvidia_host.branch_max_cuda}, nvidia_host.NvidiaHostError
        )
