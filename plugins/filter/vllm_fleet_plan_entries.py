"""vllm_fleet_plan_entries(models, gpu_groups, hostvars, settings): (group, model) pairs and metadata sources.

A thin shim over plugins/plugin_utils/fleet_ops/plan_report.py (normalize_entries).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report


def vllm_fleet_plan_entries(
    models: Any, gpu_groups: Any, hostvars: Any, settings: Any = None
) -> list[dict[str, Any]]:
    """The (group, model) pairs to plan; see vllm_fleet_plan_entries.yml."""
    if models is not None and not isinstance(models, list):
        raise AnsibleFilterError(f"vllm_fleet_plan_entries: fleet_plan_models must be a list, got {models!r}")
    try:
        return plan_report.normalize_entries(
            models or [], dict(gpu_groups or {}), hostvars, dict(settings or {})
        )
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_plan_entries: {exc}") from exc


class FilterModule:
    """The (GPU group, model) pairs playbooks/plan.yml plans, with where each one's metadata is read."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_plan_entries": vllm_fleet_plan_entries}
