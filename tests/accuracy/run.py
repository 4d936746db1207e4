#!/usr/bin/env python3
"""Replay real vLLM startup logs against the planner's predictions.

Each file in cases/ records one vLLM start found in public sources (URL in `source`): the model
(a config from tests/data/model-configs, optionally with `config_overrides`), the GPU, the vLLM
version, the arguments it ran with, and what its log printed ("Model loading took", "Available KV
cache memory", "GPU KV cache size", "Graph capturing finished ... took"). Settings the run left at
vLLM's defaults are filled in with vLLM's own defaults for that release, GPU class and usage context
(the plan's `vllm_defaults`), so the planner predicts the same configuration.

Prints predicted vs logged per case, the median / p90 / worst relative error of the weights, the KV
cache tokens, the available KV-cache memory and the CUDA-graph pool, and how many of the startups that
failed
(`expected.starts: false`, with vLLM's error in `expected.error`) the planner predicts as failing.
Exit status 0 (a report, not a gate) unless
--max-error is given and a median exceeds it.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))  # this clone as the collection vllm_fleet.vllm_fleet

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan  # noqa: E402

CASES = Path(__file__).resolve().parent / "cases"
CONFIGS = ROOT / "tests" / "data" / "model-configs"
GIB = 1 << 30


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_case(path: Path) -> dict[str, Any]:
    case = json.loads(path.read_text())
    for key in ("name", "source", "model", "gpu", "vllm_version", "expected"):
        if key not in case:
            raise ValueError(f"{path.name}: missing {key}")
    return case


def predict(case: dict[str, Any]) -> dict[str, Any]:
    model_dir = CONFIGS / case["model"]
    cfg = json.loads((model_dir / "config.json").read_text())
    side = model_dir / "hf_quant_config.json"
    if side.is_file() and "quantization_config" not in cfg:
        cfg["hf_quant_config"] = json.loads(side.read_text())
    if case.get("config_overrides"):
        cfg = _merge(cfg, case["config_overrides"])
    args = dict(case.get("args", {}))
    args.setdefault("tensor_parallel_size", 1)
    args["vllm_version"] = case["vllm_version"]
    args["workload"] = "batch" if case.get("usage") == "offline" else "chat"
    # What the run left unset takes vLLM's own default for the release, GPU class and usage context
    # (max_model_len: the model's, never capped), as the planner predicts it for vLLM without those args.
    own = plan(cfg, case["gpu"], options=args)["vllm_defaults"]
    for key in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        args.setdefault(key, own[key])
    return plan(cfg, case["gpu"], options=args)


# (error key, the case's logged figure, column title, width, "predicted/logged" text, the plan's figure)
COLUMNS: tuple[tuple[str, str, str, int, Callable[[Any, Any], str], Callable[[dict[str, Any]], Any]], ...] = (
    (
        "weights",
        "weights_gib",
        "weights GiB pred/log",
        23,
        lambda p, g: f"{p:7.2f}/{g:7.2f}",
        lambda r: r["per_gpu"]["weights_bytes"] / GIB,
    ),
    (
        "kv_tokens",
        "kv_cache_tokens",
        "KV tokens pred/log",
        26,
        lambda p, g: f"{p:9d}/{g:8d}",
        lambda r: r["kv_cache_tokens"],
    ),
    (
        "kv_gib",
        "available_kv_gib",
        "avail KV GiB pred/log",
        23,
        lambda p, g: f"{p:6.2f}/{g:6.2f}",
        lambda r: r["available_kv_cache_bytes"] / GIB,
    ),
    (
        "graphs",
        "cuda_graph_gib",
        "graphs GiB pred/log",
        20,
        lambda p, g: f"{p:5.2f}/{g:5.2f}",
        lambda r: r["per_gpu"]["cuda_graph_bytes"] / GIB,
    ),
)


def _rel(pred: float, actual: float) -> float:
    return (pred - actual) / actual if actual else float("nan")


def _p90(values: list[float]) -> float:
    """Nearest-rank 90th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--max-error", type=float, help="fail when a median relative error exceeds this")
    ns = parser.parse_args(argv)
    files = sorted(ns.cases.glob("*.json"))
    if not files:
        print(f"no cases in {ns.cases}", file=sys.stderr)
        return 1
    errs: dict[str, list[tuple[str, float]]] = {key: [] for key, *_rest in COLUMNS}
    failed_starts: list[tuple[str, bool]] = []
    header = f"{'case':42s}" + "".join(
        f" {title:>{width}s}" for _key, _exp, title, width, _fmt, _get in COLUMNS
    )
    print(header)
    print("-" * len(header))
    for path in files:
        case = load_case(path)
        result = predict(case)
        exp = case["expected"]
        cols = []
        for key, logged_key, _title, width, fmt, get in COLUMNS:
            if logged_key not in exp:
                cols.append(f"{'-':>{width}s}")
                continue
            pred, logged = get(result), exp[logged_key]
            e = _rel(pred, logged)
            errs[key].append((case["name"], e))
            cols.append(f"{fmt(pred, logged)} {e:+7.1%}".rjust(width))
        mark = ""
        if exp.get("starts") is False:
            caught = not result["feasible"]
            failed_starts.append((case["name"], caught))
            mark = "  failed start: " + ("predicted" if caught else "MISSED")
        print(f"{case['name']:42s} " + " ".join(cols) + mark)
    print()
    failed = False
    for key, label in (
        ("weights", "weights"),
        ("kv_tokens", "KV cache tokens"),
        ("kv_gib", "available KV memory"),
        ("graphs", "CUDA-graph pool"),
    ):
        values = errs[key]
        if not values:
            continue
        abs_errs = [abs(v) for _, v in values]
        worst_name, worst = max(values, key=lambda x: abs(x[1]))
        median = statistics.median(abs_errs)
        print(
            f"{label:20s} n={len(values):2d}  median |rel err| {median:6.1%}  "
            f"p90 {_p90(abs_errs):6.1%}  worst {worst:+7.1%} ({worst_name})"
        )
        if ns.max_error is not None and median > ns.max_error:
            failed = True
    caught = sum(1 for _, c in failed_starts if c)
    missed = [n for n, c in failed_starts if not c]
    print(
        f"failed startups predicted as failed: {caught}/{len(failed_starts)}"
        + (f"  (missed: {', '.join(missed)})" if missed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
