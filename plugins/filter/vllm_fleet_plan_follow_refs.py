"""vllm_fleet_plan_follow_refs(entries, answers): entries pointed at the revision a branch resolved to.

A thin shim over plugins/plugin_utils/fleet_ops/plan_report.py (follow_refs).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report


def vllm_fleet_plan_follow_refs(entries: Any, answers: Any) -> list[dict[str, Any]]:
    """Entries pointed at resolved revisions; see vllm_fleet_plan_follow_refs.yml."""
    try:
        return plan_report.follow_refs(list(entries or []), list(answers or []))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_follow_refs: {exc}") from exc


class FilterModule:
    """Point plan entries at the revision a branch or tag resolved to."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_plan_follow_refs": vllm_fleet_plan_follow_refs}
