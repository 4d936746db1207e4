"""Shared helpers for the planner tests: the real config.json fixtures and GPU specs."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "model-configs"

# nvidia-smi memory.total and FB "Reserved" of captured cards (tests/data/nvidia-smi and the spec's §1.6).
H200 = {
    "name": "NVIDIA H200",
    "memory_mib": 143771,
    "count": 1,
    "compute_capability": "9.0",
    "memory_reserved_mib": 616,
}
H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "memory_mib": 81559,
    "count": 8,
    "compute_capability": "9.0",
    "memory_reserved_mib": 479,
}
A100_40 = {"name": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960, "count": 8, "compute_capability": "8.0"}
RTX4090 = {
    "name": "NVIDIA GeForce RTX 4090",
    "memory_mib": 24564,
    "count": 1,
    "compute_capability": "8.9",
    "memory_reserved_mib": 346,
}
T4 = {
    "name": "Tesla T4",
    "memory_mib": 15360,
    "count": 1,
    "compute_capability": "7.5",
    "memory_reserved_mib": 388,
}


@cache
def _load(name: str) -> str:
    folder = CONFIGS / name
    cfg = json.loads((folder / "config.json").read_text())
    side = folder / "hf_quant_config.json"
    if side.is_file():
        cfg["hf_quant_config"] = json.loads(side.read_text())
    return json.dumps(cfg)


def config(name: str) -> dict[str, Any]:
    """A fresh copy of a fixture config (ModelOpt's hf_quant_config.json merged as vLLM reads it)."""
    return copy.deepcopy(json.loads(_load(name)))


def gpu(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = dict(base)
    out.update(changes)
    return out
