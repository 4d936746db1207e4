"""vllm_serving_rollback_target(fact, name, running_hash, restart): the recorded version to return to.

A thin shim over plugins/plugin_utils/fleet_serving/deploy.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


class FilterModule:
    """The recorded deployment a model goes back to."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_rollback_target": deploy.rollback_target}, deploy.ServingError)
