"""vllm_fleet_doctor(records, settings, hub): doctor results for the host records.

A thin shim over plugins/plugin_utils/fleet_ops/doctor (evaluate), with the planner of
plugins/plugin_utils/fleet_ops/planning.py and the CUDA check of plugins/module_utils/nvidia_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor, planning


def vllm_fleet_doctor(records: Any, settings: Any = None, hub: Any = None) -> list[dict[str, Any]]:
    """Doctor results; see vllm_fleet_doctor.yml."""
    if not isinstance(records, list):
        raise AnsibleFilterError(
            f"vllm_fleet_doctor: expected a list of host records, got {type(records).__name__}"
        )
    try:
        return doctor.evaluate(
            records, settings or {}, list(hub or []), planning.doctor_planner, nvidia_host.cuda_check
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_doctor: {exc}") from exc


class FilterModule:
    """Judge every doctor check over the host records."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_doctor": vllm_fleet_doctor}
