"""nvidia_host_gpu_branch_problems(gpus, branch): GPU models that cannot run a driver branch.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """The GPU models that cannot run a driver branch."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_gpu_branch_problems": nvidia_host.gpu_branch_problems}, nvidia_host.NvidiaHostError
        )
