"""vllm_fleet_bench_knee(steps, factor): the knee of the steps recorded so far.

A thin shim over plugins/plugin_utils/fleet_ops/bench.py (steps_knee).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import bench


class FilterModule:
    """The knee of the benchmark steps recorded so far."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters({"vllm_fleet_bench_knee": bench.steps_knee})
