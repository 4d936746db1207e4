"""fleet_rollout_containers(before, fact, declared, prefix): model -> container name.

A thin shim over plugins/plugin_utils/fleet_rollout/gates.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import gates


class FilterModule:
    """Container name of each model recorded before, recorded now or declared now."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_containers": gates.containers})
