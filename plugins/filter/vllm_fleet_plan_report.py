"""vllm_fleet_plan_report(entries): plans for (group, model) entries, plan vs actual.

A thin shim over plugins/plugin_utils/fleet_ops/plan_report.py (build_report) with the planner of
plugins/plugin_utils/fleet_ops/planning.py.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report, planning


def vllm_fleet_plan_report(entries: Any) -> dict[str, Any]:
    """Plans for the (group, model) entries; see vllm_fleet_plan_report.yml."""
    if not isinstance(entries, list):
        raise AnsibleFilterError(
            f"vllm_fleet_plan_report: expected a list of entries, got {type(entries).__name__}"
        )
    return plan_report.build_report(entries, planning.plan, planning.gpu_spec)


class FilterModule:
    """Plan every (GPU group, model) entry and compare with what vLLM reported."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_plan_report": vllm_fleet_plan_report}
