"""vllm_fleet_mig_gpu_spec(mig_target): planner GPU dict, MIG instance.

A thin shim over plugins/plugin_utils/fleet_planner/mig.py (mig_gpu_spec).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import short_repr
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import mig


def vllm_fleet_mig_gpu_spec(mig_target: Any) -> dict[str, Any]:
    """The planner's gpu dict of one MIG GPU instance; see vllm_fleet_mig_gpu_spec.yml."""
    try:
        return mig.mig_gpu_spec(mig_target)
    except (fleet_planner.PlanInputError, TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError(f"vllm_fleet_mig_gpu_spec: {exc} (value={short_repr(mig_target)})") from exc


class FilterModule:
    """Planner GPU description of one MIG GPU instance."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_mig_gpu_spec": vllm_fleet_mig_gpu_spec}
