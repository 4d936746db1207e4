"""vllm_serving_model_features(config, tokenizer_config, settings, vllm_version, name): task, parsers, flags.

A thin shim over plugins/plugin_utils/fleet_serving/model_features.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import (
    deploy,
    model_features,
)


class FilterModule:
    """The vllm serve flags that make one model's OpenAI API edges work."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(
            {"vllm_serving_model_features": model_features.model_features}, deploy.ServingError
        )
