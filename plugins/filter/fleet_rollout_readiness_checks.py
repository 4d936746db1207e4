"""fleet_rollout_readiness_checks(fact, models): a completion, or a running container.

A thin shim over plugins/plugin_utils/fleet_rollout/gates.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import gates


class FilterModule:
    """How each model of a host is checked after a change - a real completion, or a running container."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_readiness_checks": gates.readiness_checks})
