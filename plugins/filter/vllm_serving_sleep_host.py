"""vllm_serving_sleep_host(models, plans, settings): the sleep controller in front of the models that may
sleep.

A thin shim over plugins/plugin_utils/fleet_serving/sleep_host.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, sleep_host


class FilterModule:
    """The sleep controller in front of a host's models that may sleep."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_sleep_host": sleep_host.sleep_host}, deploy.ServingError)
