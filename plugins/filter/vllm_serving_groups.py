"""Filters for serving groups (one replica over several hosts): thin shims over
plugins/plugin_utils/fleet_serving/groups.py and fleet_planner/group.py.

vllm_serving_group_members(specs, host, hostvars, rdma_paths)  each container spec as a group member
vllm_serving_group_gpu_spec(group, facts_by_host, gpus, shared)  the planner GPU dict of a whole group
vllm_serving_group_of(hostvars[host], host)      the host's serving group and rank ({} when it serves alone)
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import PlanInputError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.group import group_gpu_spec
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, groups


def group_spec(group: str, facts_by_host: Any, gpus: Any = None, shared: bool = False) -> dict[str, Any]:
    """``facts_by_host``: ``[[host, nvidia_gpu facts], ...]`` in rank order."""
    try:
        return group_gpu_spec(str(group), [(str(h), f) for h, f in facts_by_host], gpus, bool(shared))
    except PlanInputError as exc:
        raise deploy.ServingError(str(exc)) from None


class FilterModule:
    """Serving groups."""

    def filters(self) -> dict[str, Any]:
        table = {
            "vllm_serving_group_members": groups.member_specs,
            "vllm_serving_group_gpu_spec": group_spec,
            "vllm_serving_group_of": groups.group_of_host,
        }
        return wrap_filters(table, deploy.ServingError)
