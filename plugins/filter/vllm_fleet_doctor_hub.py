"""vllm_fleet_doctor_hub(checks, offline, declared): results of the Hugging Face access probes.

A thin shim over plugins/plugin_utils/fleet_ops/doctor/hub.py (hub_results).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor


def vllm_fleet_doctor_hub(checks: Any, offline: Any = False, declared: Any = 0) -> list[dict[str, Any]]:
    """Hugging Face access results; see vllm_fleet_doctor_hub.yml."""
    return doctor.hub_results(list(checks or []), bool(offline), int(declared or 0))


class FilterModule:
    """Results of the Hugging Face access checks."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_doctor_hub": vllm_fleet_doctor_hub}
