"""nvidia_host_installed_packages(text, manager): dpkg-query / rpm -qa output as ansible_facts.packages.

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """Installed packages in the shape of ansible_facts.packages."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_installed_packages": nvidia_host.installed_packages}, nvidia_host.NvidiaHostError
        )
