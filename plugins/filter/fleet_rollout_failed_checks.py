"""fleet_rollout_failed_checks(results): readiness checks that did not pass.

A thin shim over plugins/plugin_utils/fleet_rollout/gates.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import gates


class FilterModule:
    """The readiness checks of a gate that did not pass."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_failed_checks": gates.failed_checks})
