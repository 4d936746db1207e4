"""vllm_fleet_image_version(model, image, vllm_version): the image a model runs and the vLLM release in it.

A thin shim over plugins/plugin_utils/fleet_serving/images.py (one tag parser, one fallback chain).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, images


class FilterModule:
    """A model's image and vLLM version."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_fleet_image_version": images.image_version}, deploy.ServingError)
