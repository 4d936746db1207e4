"""Sleeping models (#28): the sleep controller's budget and per-model bytes from the plans, sized as
sleep.awake_check sizes them, so that the controller keeps awake at most what the awake check let through.

Exports:
  sleep_budget(models, plans) -> dict
      ``budget_bytes``: the GPU bytes left for the awake sleepers (the GPU's, less the models without
      ``sleep``, always awake, and what every sleeper keeps asleep); ``bytes``: name -> what waking it adds
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .deploy import ServingError
from .sleep import _asleep_bytes, _awake_bytes


def sleep_budget(
    models: Sequence[Mapping[str, Any]], plans: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """``models``: the ``vllm_server_models`` sharing the same GPUs; ``plans``: name -> each one's plan as if
    alone (per_gpu.total_bytes, non_torch_bytes, cuda_graph_bytes; gpu_memory_utilization)."""
    sleepers = [str(m["name"]) for m in models if m.get("sleep")]
    always = [str(m["name"]) for m in models if not m.get("sleep")]
    missing = [n for n in sleepers + always if n not in plans]
    if missing:
        raise ServingError(f"sleep controller: no plan for {', '.join(missing)}")
    total = max(
        (int((plans[n].get("per_gpu") or {}).get("total_bytes") or 0) for n in sleepers + always), default=0
    )
    budget = (
        total - sum(_awake_bytes(plans[n]) for n in always) - sum(_asleep_bytes(plans[n]) for n in sleepers)
    )
    return {
        "budget_bytes": budget,
        "bytes": {n: max(0, _awake_bytes(plans[n]) - _asleep_bytes(plans[n])) for n in sleepers},
    }
