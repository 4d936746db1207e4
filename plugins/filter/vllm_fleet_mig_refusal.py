"""vllm_fleet_mig_refusal(mig_target, model, errors): why a model misses an instance.

A thin shim over plugins/plugin_utils/fleet_planner/mig.py (mig_refusal).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import mig


def vllm_fleet_mig_refusal(mig_target: Any, model: Any, errors: Any = None) -> str:
    """One line: why a model does not fit a MIG instance, and the fix; see vllm_fleet_mig_refusal.yml."""
    return mig.mig_refusal(mig_target, str(model), errors)


class FilterModule:
    """Why a model cannot be served on a MIG instance, and the fix."""

    def filters(self) -> dict[str, Any]:
        return {"vllm_fleet_mig_refusal": vllm_fleet_mig_refusal}
