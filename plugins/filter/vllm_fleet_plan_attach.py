"""vllm_fleet_plan_attach(entries, files, facts, deployed, source): entries with metadata, facts and
deployments.

A thin shim over plugins/plugin_utils/fleet_ops/plan_report.py (attach_inputs).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report


def vllm_fleet_plan_attach(
    entries: Any, files: Any, facts: Any, deployed: Any, source: Any = "live"
) -> list[dict[str, Any]]:
    """Entries with their metadata, GPU facts and deployments; see vllm_fleet_plan_attach.yml."""
    try:
        return plan_report.attach_inputs(
            list(entries), dict(files or {}), dict(facts or {}), dict(deployed or {}), str(source)
        )
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_attach: {exc}") from exc


class FilterModule:
    """Attach model metadata, GPU facts and deployment facts to the plan entries."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_plan_attach": vllm_fleet_plan_attach}
