"""vllm_fleet_doctor_summary(results): counts per status and ok.

A thin shim over plugins/plugin_utils/fleet_ops/doctor/report.py (summary).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor


def vllm_fleet_doctor_summary(results: Any) -> dict[str, Any]:
    """Counts per status; see vllm_fleet_doctor_summary.yml."""
    return doctor.summary(list(results or []))


class FilterModule:
    """Counts of doctor results per status."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_doctor_summary": vllm_fleet_doctor_summary}
