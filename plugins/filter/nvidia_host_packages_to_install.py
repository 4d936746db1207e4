"""nvidia_host_packages_to_install(status, names, version): packages missing or at another version.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """The packages of a list that are missing or at another version."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_packages_to_install": nvidia_host.packages_to_install}, nvidia_host.NvidiaHostError
        )
