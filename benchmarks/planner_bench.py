#!/usr/bin/env python3
"""Planner throughput: plan 10,000 (host, model) pairs and compare the time with the 2 s target.

Hosts vary the GPU model (memory, compute capability), GPUs per node, node count, sharing and vLLM
release; models are the real config.json fixtures; options vary the context target and workload.
Config resolution is cached per config object, so repeated models cost only the per-plan arithmetic,
as in a fleet run where one model is planned for many hosts. Each run is a fresh process, so every
run starts with the planner's caches empty; the fastest of --repeat runs is reported (another tenant on
a shared machine only ever slows a run down), next to every run's figure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "collections"))  # this clone as the collection vllm_fleet.vllm_fleet

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan  # noqa: E402

TARGET_SECONDS = 2.0
CONFIGS = ROOT / "tests" / "data" / "model-configs"
GPUS = [
    ("NVIDIA H200", 143771, "9.0"),
    ("NVIDIA H100 80GB HBM3", 81559, "9.0"),
    ("NVIDIA H100 NVL", 95830, "9.0"),
    ("NVIDIA A100-SXM4-80GB", 81920, "8.0"),
    ("NVIDIA A100-SXM4-40GB", 40960, "8.0"),
    ("NVIDIA L40S", 46068, "8.9"),
    ("NVIDIA RTX A6000", 46068, "8.6"),
    ("NVIDIA GeForce RTX 4090", 24564, "8.9"),
    ("NVIDIA L4", 23034, "8.9"),
    ("NVIDIA A10", 23028, "8.6"),
    ("Tesla T4", 15360, "7.5"),
    ("NVIDIA B200", 183359, "10.0"),
]
COUNTS = [1, 2, 4, 8]
NODES = [1, 2]
VERSIONS = ["0.8.5", "0.11.0", "0.20.1", "0.28.0", "0.34.0"]
OPTIONS = [
    {},
    {"target_context_len": 8192},
    {"target_context_len": 32768, "workload": "batch"},
    {"kv_cache_dtype": "fp8"},
]


def load_models() -> list[dict]:
    models = []
    for folder in sorted(p for p in CONFIGS.iterdir() if (p / "config.json").is_file()):
        cfg = json.loads((folder / "config.json").read_text())
        side = folder / "hf_quant_config.json"
        if side.is_file():
            cfg["hf_quant_config"] = json.loads(side.read_text())
        models.append(cfg)
    return models


def pairs(n: int, models: list[dict]) -> list[tuple[dict, dict, dict]]:
    hosts = [
        {
            "name": name,
            "memory_mib": mib,
            "compute_capability": cc,
            "count": count,
            "nodes": nodes,
            "shared": shared,
        }
        for (name, mib, cc), count, nodes, shared in itertools.product(GPUS, COUNTS, NODES, (False, True))
    ]
    out = []
    combos = itertools.cycle(
        itertools.product(range(len(hosts)), range(len(models)), VERSIONS, range(len(OPTIONS)))
    )
    for _ in range(n):
        h, m, version, o = next(combos)
        opts = dict(OPTIONS[o], vllm_version=version)
        out.append((models[m], hosts[(h * 7 + m) % len(hosts)], opts))
    return out


def run_once(n: int) -> tuple[int, int, int, float, float]:
    """Plan n pairs in this process: (pairs, models, feasible, wall seconds, CPU seconds)."""
    models = load_models()
    work = pairs(n, models)
    feasible = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for cfg, host, opts in work:
        result = plan(cfg, host, options=opts)
        feasible += result["feasible"]
    return len(work), len(models), feasible, time.perf_counter() - start, time.process_time() - cpu_start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs, each in a fresh process (the planner's caches start empty); the fastest counts",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.child:
        print(json.dumps(run_once(ns.pairs)))
        return 0
    runs = []
    for _ in range(max(ns.repeat, 1)):
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--pairs", str(ns.pairs)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(out.splitlines()[-1]))
    n, n_models, feasible = runs[0][:3]
    cpu_all = sorted(r[4] for r in runs)
    cpu = cpu_all[0]
    wall = min(r[3] for r in runs)
    print(
        f"planned {n} (host, model) pairs ({n_models} models, {len(GPUS)} GPU models, "
        f"{len(VERSIONS)} vLLM releases, {feasible} feasible) in {len(runs)} fresh processes: CPU "
        f"{', '.join(f'{c:.3f}' for c in cpu_all)} s; fastest {cpu:.3f} s CPU ({wall:.3f} s wall), "
        f"{cpu / n * 1e6:.0f} us/plan"
    )
    # CPU time is the planner's own work; on a shared machine other tenants only ever slow a run down, so
    # the fastest of the runs (each with cold caches) is the estimate of its cost.
    verdict = "within" if cpu <= TARGET_SECONDS else "over"
    print(
        f"ratio to the {TARGET_SECONDS:.0f} s target: CPU {cpu / TARGET_SECONDS:.2f} ({verdict} target); "
        f"slowest run {cpu_all[-1] / TARGET_SECONDS:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
