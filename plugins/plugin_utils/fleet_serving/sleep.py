"""Sleeping models (#28): ``vllm_server_models[].sleep`` (level 1 or 2) -> vLLM's sleep mode, and whether the
models allowed awake at once fit their GPUs.

Exports:
  sleep_launch(level, vllm_version, var) -> dict
      ``args`` (``--enable-sleep-mode``), ``env`` (``VLLM_SERVER_DEV_MODE=1``) and ``level``; {} when off
  awake_check(models, plans, awake) -> dict
      the GPU bytes of the worst awake set (each model sized as if alone) next to the GPU's; raises
      ServingError when it does not fit
  check_setting(value, var) -> str | None
      what is wrong with one ``sleep`` value (validate), None when fine

vLLM, per release: ``--enable-sleep-mode`` (vllm/engine/arg_utils.py; CUDA and ROCm only) since 0.7, so every
release the fleet deploys (0.8+). ``POST /sleep?level=N``, ``POST /wake_up`` and ``GET /is_sleeping`` are
registered only with ``VLLM_SERVER_DEV_MODE=1`` (vllm/envs.py; the API server's dev-mode routes), so the role
sets it and the gateway never routes those paths to clients. Level 1 moves the weights to CPU RAM and drops
the KV cache; level 2 drops both (a wake reloads the weights). Both keep the CUDA context and, unless
``--sleep-mode-offload-cudagraph`` (0.32.0's help), the CUDA graphs on the GPU: a sleeping model still holds
its non-torch memory and graphs, which the awake check counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .deploy import ServingError

LEVELS = (1, 2)

DEV_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}
GIB = 1024**3


def check_setting(value: Any, var: str) -> str | None:
    if value in (None, False):
        return None
    if isinstance(value, bool) or value not in LEVELS:
        return f"{var} must be 1 (weights to CPU RAM) or 2 (weights dropped) or false, got {value!r}"
    return None


def sleep_launch(level: Any, vllm_version: str, var: str) -> dict[str, Any]:
    problem = check_setting(level, var)
    if problem:
        raise ServingError(problem)
    if level in (None, False):
        return {}
    return {"args": ["--enable-sleep-mode"], "env": dict(DEV_MODE_ENV), "level": int(level)}


def _awake_bytes(plan: Mapping[str, Any]) -> int:
    """What a model takes awake on each of its GPUs: its gpu_memory_utilization share, as when alone."""
    per_gpu = plan.get("per_gpu") or {}
    return int(float(plan.get("gpu_memory_utilization") or 0) * int(per_gpu.get("total_bytes") or 0))


def _asleep_bytes(plan: Mapping[str, Any]) -> int:
    """What a sleeping model keeps on each GPU: CUDA context and other non-torch memory, and its graphs."""
    per_gpu = plan.get("per_gpu") or {}
    return int(per_gpu.get("non_torch_bytes") or 0) + int(per_gpu.get("cuda_graph_bytes") or 0)


def awake_check(
    models: Sequence[Mapping[str, Any]], plans: Mapping[str, Mapping[str, Any]], awake: Any = 1
) -> dict[str, Any]:
    """Whether the models sharing GPUs fit with ``awake`` of the sleep-capable ones awake at once.

    ``models``: the ``vllm_server_models`` sharing the same GPUs; ``plans``: name -> the plan of each, made as
    if the model were alone on them; ``awake``: how many models with ``sleep`` may be awake at once. The worst
    case counts: the models without ``sleep`` (always awake), the largest ``awake`` sleepers awake and the
    other sleepers asleep.
    """
    if isinstance(awake, bool) or not isinstance(awake, int) or awake < 1:
        raise ServingError(f"the models awake at once must be a whole number >= 1, got {awake!r}")
    always = [str(m["name"]) for m in models if not m.get("sleep")]
    sleepers = [str(m["name"]) for m in models if m.get("sleep")]
    total = max((int((plans[n].get("per_gpu") or {}).get("total_bytes") or 0) for n in plans), default=0)
    ranked = sorted(sleepers, key=lambda n: _awake_bytes(plans[n]) - _asleep_bytes(plans[n]), reverse=True)
    up, down = ranked[:awake], ranked[awake:]
    need = sum(_awake_bytes(plans[n]) for n in always + up) + sum(_asleep_bytes(plans[n]) for n in down)
    result = {
        "gpu_bytes": total,
        "worst_awake_bytes": need,
        "always_awake": always,
        "worst_awake_sleepers": up,
        "asleep": down,
        "fits": need <= total,
    }
    if need > total:
        parts = ", ".join(f"{n} {_awake_bytes(plans[n]) / GIB:.1f} GiB" for n in always + up)
        raise ServingError(
            f"the models allowed awake at once do not fit their GPUs: {parts} awake, "
            f"{len(down)} asleep holding {sum(_asleep_bytes(plans[n]) for n in down) / GIB:.1f} GiB, "
            f"{need / GIB:.1f} GiB of {total / GIB:.1f} GiB; lower gpu_memory_utilization in their "
            "overrides, set sleep on more of them, or allow fewer of them awake at once"
        )
    return result
