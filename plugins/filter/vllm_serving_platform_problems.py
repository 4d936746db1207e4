"""vllm_serving_platform_problems(images, spec): what a CPU build of vLLM refuses of a model (sleep, KV tier).

A thin shim over plugins/plugin_utils/fleet_serving/platform.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, platform


class FilterModule:
    """What a CPU build of vLLM refuses of a model's features, in vLLM's words."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_platform_problems": platform.problems}, deploy.ServingError)
