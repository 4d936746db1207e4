"""nvidia_host_dpkg_status(text): installed packages from dpkg-query (version, held).

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """Installed packages, their versions and holds, from dpkg-query."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"nvidia_host_dpkg_status": nvidia_host.dpkg_status}, nvidia_host.NvidiaHostError)
