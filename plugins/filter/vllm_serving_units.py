"""vllm_serving_units(models, nvidia_gpu_facts): one container per model, one per MIG instance with `mig`.

A thin shim over plugins/plugin_utils/fleet_serving/mig.py.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, mig


class FilterModule:
    """The vLLM containers of one host, one per model and one per MIG instance."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_serving_units": mig.serving_units}, deploy.ServingError)
