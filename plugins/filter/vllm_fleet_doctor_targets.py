"""vllm_fleet_doctor_targets(host_vars): what to probe on a host, and its record skeleton.

A thin shim over plugins/plugin_utils/fleet_ops/doctor/targets.py.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor


def vllm_fleet_doctor_targets(host_vars: Any) -> dict[str, Any]:
    """What to probe on a host; see vllm_fleet_doctor_targets.yml."""
    try:
        return doctor.targets(dict(host_vars))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_doctor_targets: {exc}") from exc


class FilterModule:
    """What the doctor probes on one host, and the skeleton of its record."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_doctor_targets": vllm_fleet_doctor_targets}
