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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))  # this clone as the collection vllm_fleet.vllm_fleet

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.vllm_planner import plan  # noqa: E402

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
    errs: dict[str, list[tuple[str, float]]] = {"weights": [], "kv_tokens": [], "kv_gib": [], "graphs": []}
    failed_starts: list[tuple[str, bool]] = []
    header = (
        f"{'case':42s} {'weights GiB pred/log':>22s} {'KV tokens pred/log':>24s} "
        f"{'avail KV GiB pred/log':>23s} {'graphs GiB pred/log':>20s}"
    )
    print(header)
    print("-" * len(header))
    for path in files:
        case = load_case(path)
        result = predict(case)
        exp = case["expected"]
        w_pred = result["per_gpu"]["weights_bytes"] / GIB
        t_pred = result["kv_cache_tokens"]
        a_pred = result["available_kv_cache_bytes"] / GIB
        g_pred = result["per_gpu"]["cuda_graph_bytes"] / GIB
        cols = []
        if "weights_gib" in exp:
            e = _rel(w_pred, exp["weights_gib"])
            errs["weights"].append((case["name"], e))
            cols.append(f"{w_pred:7.2f}/{exp['weights_gib']:7.2f} {e:+6.1%}")
        else:
            cols.append(f"{'-':>22s}")
        if "kv_cache_tokens" in exp:
            e = _rel(t_pred, exp["kv_cache_tokens"])
            errs["kv_tokens"].append((case["name"], e))
            cols.append(f"{t_pred:9d}/{exp['kv_cache_tokens']:8d} {e:+6.1%}")
        else:
            cols.append(f"{'-':>24s}")
        if "available_kv_gib" in exp:
            e = _rel(a_pred, exp["available_kv_gib"])
            errs["kv_gib"].append((case["name"], e))
            cols.append(f"{a_pred:6.2f}/{exp['available_kv_gib']:6.2f} {e:+7.1%}")
        else:
            cols.append(f"{'-':>23s}")
        if "cuda_graph_gib" in exp:
            e = _rel(g_pred, exp["cuda_graph_gib"])
            errs["graphs"].append((case["name"], e))
            cols.append(f"{g_pred:5.2f}/{exp['cuda_graph_gib']:5.2f} {e:+7.1%}")
        else:
            cols.append(f"{'-':>20s}")
        mark = ""
        if exp.get("starts") is False:
            caught = not result["feasible"]
            failed_starts.append((case["name"], caught))
            mark = "  failed start: " + ("predicted" if caught else "MISSED")
        print(f"{case['name']:42s} {cols[0]:>22s} {cols[1]:>24s} {cols[2]:>23s} {cols[3]:>20s}{mark}")
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
