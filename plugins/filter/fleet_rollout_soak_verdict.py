"""fleet_rollout_soak_verdict(gateway, canary, vllm_delta, ...): the canary's soak result.

A thin shim over plugins/plugin_utils/fleet_rollout/gates.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import gates


class FilterModule:
    """Judge a canary after its soak."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"fleet_rollout_soak_verdict": gates.soak_verdict})
