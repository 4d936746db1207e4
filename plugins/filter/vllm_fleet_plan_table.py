"""vllm_fleet_plan_table(report): the plan report as text tables.

A thin shim over plugins/plugin_utils/fleet_ops/plan_report.py (render).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report


def vllm_fleet_plan_table(report: Any) -> str:
    """The plan report as text; see vllm_fleet_plan_table.yml."""
    try:
        return plan_report.render(report)
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_table: not a plan report ({exc})") from exc


class FilterModule:
    """The plan report as text tables."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_plan_table": vllm_fleet_plan_table}
