"""vllm_fleet_doctor_table(results): the doctor results as a table with fixes.

A thin shim over plugins/plugin_utils/fleet_ops/doctor/report.py (render).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor


def vllm_fleet_doctor_table(results: Any) -> str:
    """Doctor results as a table; see vllm_fleet_doctor_table.yml."""
    try:
        return doctor.render(list(results))
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_doctor_table: not doctor results ({exc})") from exc


class FilterModule:
    """Doctor results as a table, the fix under every failure and warning."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_doctor_table": vllm_fleet_doctor_table}
