"""vllm_serving_group_of(hostvars[host], host): the host's serving group and rank ({} when it serves alone).

A thin shim over plugins/plugin_utils/fleet_serving/groups.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, groups


class FilterModule:
    """The serving group of a host and its rank in it."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_group_of": groups.group_of_host}, deploy.ServingError)
