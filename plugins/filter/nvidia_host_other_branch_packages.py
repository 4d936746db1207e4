"""nvidia_host_other_branch_packages(packages, pattern, branch): installed driver packages of other branches.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """The installed packages of a name pattern at another driver branch."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_other_branch_packages": nvidia_host.other_branch_packages},
            nvidia_host.NvidiaHostError,
        )
