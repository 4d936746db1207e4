"""vllm_fleet_bench_progress(step, index, total, mode, elapsed, limit): one progress line per sweep step.

A thin shim over plugins/plugin_utils/fleet_ops/bench.py (step_progress).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import bench


class FilterModule:
    """One progress line for a finished benchmark step."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_fleet_bench_progress": bench.step_progress})
