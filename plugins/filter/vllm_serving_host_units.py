"""vllm_serving_host_units(models, files, facts, settings): every serving unit of one host, built once.

A thin shim over plugins/plugin_utils/fleet_serving/host_units.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.errors import PlanInputError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, host_units


class FilterModule:
    """A host's serving units: release, features, LoRA, plan, GPUs, KV tier, sleep wiring and container."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"vllm_serving_host_units": host_units.host_units},
            (deploy.ServingError, PlanInputError, ValueError, TypeError),
        )
