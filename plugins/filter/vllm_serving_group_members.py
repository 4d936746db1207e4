"""vllm_serving_group_members(specs, host, hostvars, rdma_paths): each container spec as a group member.

A thin shim over plugins/plugin_utils/fleet_serving/groups.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, groups


class FilterModule:
    """The vLLM container specs of a host as a member of its serving group."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_group_members": groups.member_specs}, deploy.ServingError)
