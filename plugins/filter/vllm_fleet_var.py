"""vllm_fleet_var(hostvars[host], name): a role's variable as a host has it, else the role's default.

A thin shim over plugins/plugin_utils/fleet_validate/values.py: roles read another role's variable
through it rather than restating the default (``| default('/var/run/docker.sock')``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_validate.values import role_value


def fleet_var(hostvars: Mapping[str, Any] | None, name: str) -> Any:
    """``name`` from ``hostvars`` (one host's), else its role's default (followed through defaults naming
    another variable)."""
    return role_value(hostvars, str(name))


class FilterModule:
    """A role's variable read across a role wall."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_fleet_var": fleet_var}, ValueError)
