"""vllm_serving_unit_spec(unit, parts, settings): the container of one served model, as vllm_server runs it.

A thin shim over plugins/plugin_utils/fleet_serving/unit.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, unit


class FilterModule:
    """A served model's container."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_unit_spec": unit.unit_spec}, deploy.ServingError)
