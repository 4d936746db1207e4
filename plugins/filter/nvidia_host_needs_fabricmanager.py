"""nvidia_host_needs_fabricmanager(facts): NVSwitch host (needs nvidia-fabricmanager).

A thin shim over plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters


class FilterModule:
    """Whether a host needs nvidia-fabricmanager (NVSwitch)."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"nvidia_host_needs_fabricmanager": nvidia_host.needs_fabricmanager}, nvidia_host.NvidiaHostError
        )
