"""vllm_fleet_doctor_hub_requests(records, endpoint): the Hugging Face access checks to make.

A thin shim over plugins/plugin_utils/fleet_ops/doctor/hub.py (hub_requests).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor


def vllm_fleet_doctor_hub_requests(records: Any, endpoint: Any = "") -> list[dict[str, Any]]:
    """The hub access checks to make; see vllm_fleet_doctor_hub_requests.yml."""
    return doctor.hub_requests(list(records or []), str(endpoint or ""))


class FilterModule:
    """The Hugging Face access checks the doctor makes."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_doctor_hub_requests": vllm_fleet_doctor_hub_requests}
