"""vllm_serving_unit_record(spec, images, ready, vllm_version): what the deployment fact records of one
running container.

A thin shim over plugins/plugin_utils/fleet_serving/unit.py, given vLLM's log comparison
(module_utils/vllm_log.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, unit


def unit_record(
    spec: Mapping[str, Any], images: Any, ready: Mapping[str, Any], vllm_version: str
) -> dict[str, Any]:
    """The record of one container; see vllm_serving_unit_record.yml."""
    return unit.unit_record(spec, list(images or []), ready or {}, vllm_version, vllm_log.plan_vs_actual)


class FilterModule:
    """A running container's deployment record."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_unit_record": unit_record}, (deploy.ServingError, KeyError))
