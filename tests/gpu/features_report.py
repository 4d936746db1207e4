"""What tests/gpu/features_034.py measured on the GPU next to what the fleet predicts for it (issue #28).

usage: python3 tests/gpu/features_report.py OUTDIR|features.tgz [--json]
One row per figure: measured, predicted, measured / predicted. The predictions are the collection's own code,
fed the measured GPU and host: fleet_serving.platform.problems for whether a CUDA image runs each feature;
the planner (fleet_planner.plan, what bin/vllm-fleet-plan prints) for the weights, KV cache and what a drafter
adds; fleet_serving.sleep_plan.sleep_budget and sleep._asleep_bytes for what sleeping frees and keeps;
fleet_serving.kv_offload.kv_offload for the host tier per TP rank. Figures the fleet does not predict (times,
acceptance, hit rates without a tier, time to first token) are printed with no prediction.
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# pylint: disable=wrong-import-position
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import plan  # noqa: E402
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.kv_offload import (  # noqa: E402
    kv_offload,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.platform import (  # noqa: E402
    CUDA_LABEL,
    problems,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep import (  # noqa: E402
    _asleep_bytes,
    _awake_bytes,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep_plan import (  # noqa: E402
    sleep_budget,
)
from features_034 import CONFIGS, FEATURES, MODEL, model_of  # noqa: E402

GIB = 1024**3
MIB = 1024**2
VLLM = "0.34.0"
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}

# vLLM 0.34's log lines (vllm/v1/worker/gpu/model_runner.py, gpu_worker.py, v1/core/kv_cache_utils.py,
# v1/worker/extensible_kv_cache.py, v1/kv_offload/cpu/shared_offload_region.py, v1/kv_offload/factory.py)
_ONE = {
    "model_loading_gib": r"Model loading took ([\d.]+) GiB",
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "gpu_kv_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "offload_region_gb": r"Created mmap file \S+ \(([\d.]+) GB\)",
    "offload_spec": r"Creating offloading spec with name: (\S+)",
    "exit": r"^EXIT (\S+) after",
}


def parse_log(text: str) -> dict[str, Any]:
    """The figures vLLM logged: the last match of each one-off line, every sleep and KV extension line."""
    out: dict[str, Any] = {}
    for key, pattern in _ONE.items():
        found = re.findall(pattern, text, re.MULTILINE)
        if found:
            v = found[-1].replace(",", "")
            out[key] = v if key in ("offload_spec", "exit") else float(v)
    if "gpu_kv_tokens" in out:
        out["gpu_kv_tokens"] = int(out["gpu_kv_tokens"])
    out["sleep_freed"] = [
        {"freed_gib": float(a), "in_use_gib": float(b)}
        for a, b in re.findall(
            r"Sleep mode freed ([\d.]+) GiB memory, ([\d.]+) GiB memory is still in use", text
        )
    ]
    ext = re.findall(r"Extended KV cache to (\d+) blocks \(([\d.]+) GiB\)", text)
    if ext:
        out["extended_kv_blocks"], out["extended_kv_gib"] = int(ext[-1][0]), float(ext[-1][1])
    return out


def load(outdir: Path) -> dict[str, dict[str, Any]]:
    """Per feature run: its result JSON (or {}) and its parsed log (or {})."""
    runs: dict[str, dict[str, Any]] = {}
    for name in FEATURES:
        res, log = outdir / f"{name}.json", outdir / f"{name}.log"
        if not res.is_file() and not log.is_file():
            continue
        runs[name] = {
            "result": json.loads(res.read_text()) if res.is_file() else {},
            "log": parse_log(log.read_text(errors="replace")) if log.is_file() else {},
        }
    return runs


def _step(result: Mapping[str, Any], name: str) -> dict[str, Any]:
    return next((s for s in result.get("steps") or [] if s.get("step") == name), {})


def _used(result: Mapping[str, Any], name: str) -> int | None:
    """GPU memory in use at a step, bytes (nvidia-smi, else torch)."""
    s = _step(result, name)
    if "smi_used_mib" in s:
        return int(s["smi_used_mib"]) * MIB
    return s.get("torch_used_bytes")


def _diff(a: int | float | None, b: int | float | None) -> float | None:
    return None if a is None or b is None else a - b


def _counter(snapshot: list[Mapping[str, Any]] | None, name: str, **labels: str) -> float:
    """The sum over a counter's samples whose labels match."""
    base = name.removesuffix("_total")
    return float(
        sum(
            m.get("value") or 0
            for m in snapshot or []
            if m.get("name", "").removesuffix("_total") == base
            and all((m.get("labels") or {}).get(k) == v for k, v in labels.items())
        )
    )


def _vector(snapshot: list[Mapping[str, Any]] | None, name: str) -> list[float]:
    for m in snapshot or []:
        if m.get("name") == name and "values" in m:
            return [float(v) for v in m["values"]]
    return []


def gpu_of(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The GPU as the planner takes it, from what nvidia-smi said in the runs (an H100 80GB otherwise)."""
    for run in runs.values():
        for s in run["result"].get("steps") or []:
            if s.get("smi_total_mib") and s.get("gpu"):
                return {"name": s["gpu"], "memory_mib": int(s["smi_total_mib"]), "count": 1}
    return {**H100, "count": 1}


def _args(run: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """The engine args the run was given (FEATURE_EXTRA may have changed them), else the script's."""
    return dict(((run or {}).get("result") or {}).get("args") or FEATURES[name][1])


def _plan(gpu: Mapping[str, Any], args: Mapping[str, Any], model: str = MODEL) -> dict[str, Any]:
    config = json.loads((CONFIGS / model / "config.json").read_text())
    # features_034 starts LLM(): vLLM's offline (LLM_CLASS) scheduler defaults (16,384 tokens on an H100)
    options: dict[str, Any] = {"vllm_version": VLLM, "workload": "batch"}
    for key in ("max_model_len", "enforce_eager", "gpu_memory_utilization"):
        if key in args:
            options[key] = args[key]
    if "speculative_config" in args:
        options["speculative"] = dict(args["speculative_config"])
    # the run left the scheduler to vLLM: plan with vLLM's own defaults, as tests/accuracy/run.py does
    own = plan(config, dict(gpu), options=options)["vllm_defaults"]
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        options.setdefault(key, own[key])
    return plan(config, dict(gpu), options=options)


def _row(
    feature: str, figure: str, unit: str, measured: Any, predicted: Any, note: str = ""
) -> dict[str, Any]:
    def num(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    m, p = num(measured), num(predicted)
    scale = GIB if unit == "GiB" else 1
    return {
        "feature": feature,
        "figure": figure,
        "unit": unit,
        "measured": round(m / scale, 3) if m is not None else measured,
        "predicted": round(p / scale, 3) if p is not None else predicted,
        "ratio": round(m / p, 3) if m is not None and p else None,
        "note": note,
    }


def _tier_rows(feature: str, predicted: dict, log: dict, tier: float, shm: Any) -> list[dict]:
    """The flags the fleet renders and the host tier per TP rank, by vLLM's log and by /dev/shm's growth."""
    region = log["offload_region_gb"] * 1e9 if "offload_region_gb" in log else None
    return [
        _row(feature, "vllm serve flags (fleet)", "", " ".join(predicted["args"]), None),
        _row(feature, "host tier per TP rank (vLLM's log)", "GiB", region, tier, predicted["why"]),
        _row(feature, "host tier per TP rank (/dev/shm growth)", "GiB", shm, tier),
    ]


def _failed(feature: str, run: Mapping[str, Any] | None) -> dict[str, Any] | None:
    res = (run or {}).get("result") or {}
    if run is None:
        return _row(feature, "run", "", "not run", None)
    if not res.get("ok"):
        why = res.get("error") or f"no result (exit {(run.get('log') or {}).get('exit', '?')})"
        return _row(feature, "run", "", "FAILED", None, " ".join(str(why).split())[:200])
    return None


def sleep_rows(run: Mapping[str, Any] | None, gpu: Mapping[str, Any]) -> list[dict[str, Any]]:
    bad = _failed("sleep", run)
    rows = [bad] if bad else []
    if run is None or not run.get("result"):
        return rows
    res, log = run["result"], run["log"]
    p = _plan(gpu, _args(run, "sleep"))
    g = p["per_gpu"]
    idle = _used(res, "before_import")
    awake = _used(res, "awake_after_generate") or _used(res, "awake")
    budget = sleep_budget([{"name": "m", "sleep": 1}], {"m": p})["bytes"]["m"]
    rows += [
        _row(
            "sleep",
            "weights (vLLM: Model loading took)",
            "GiB",
            _gib(log.get("model_loading_gib")),
            g["weights_bytes"],
        ),
        _row(
            "sleep",
            "KV cache tokens (engine)",
            "tokens",
            (res.get("engine") or {}).get("kv_cache_size_tokens"),
            p["kv_cache_tokens"],
        ),
        _row(
            "sleep",
            "GPU in use awake (nvidia-smi, less idle)",
            "GiB",
            _diff(awake, idle),
            _awake_bytes(p),
            f"gpu_memory_utilization {p['gpu_memory_utilization']} of the GPU",
        ),
    ]
    step_rss = {s.get("step"): s.get("rss_bytes") for s in res.get("steps") or []}
    step_avail = {s.get("step"): s.get("MemAvailable_bytes") for s in res.get("steps") or []}
    # what vLLM said it holds: the weights it loaded and the KV cache it committed (extensible) or sized
    kv_gib = log.get("extended_kv_gib", log.get("available_kv_gib"))
    held = _gib(log["model_loading_gib"] + kv_gib) if "model_loading_gib" in log and kv_gib else None
    for level in (1, 2):
        asleep = _used(res, f"asleep_{level}")
        freed_log = (log.get("sleep_freed") or [])[level - 1 : level]
        lv = res.get(f"level{level}") or {}
        rows += [
            _row(
                "sleep",
                f"level {level}: GPU freed (nvidia-smi)",
                "GiB",
                _diff(awake, asleep),
                budget,
                "sleep_budget: awake share - what a sleeper keeps",
            ),
            _row(
                "sleep",
                f"level {level}: GPU freed (vLLM's log)",
                "GiB",
                _gib(freed_log[0]["freed_gib"]) if freed_log else None,
                budget,
            ),
            _row(
                "sleep",
                f"level {level}: GPU freed vs vLLM's weights + KV",
                "GiB",
                _diff(awake, asleep),
                held,
                "vLLM's log: Model loading took + Extended KV cache to (or Available KV cache memory)",
            ),
            _row(
                "sleep",
                f"level {level}: GPU kept asleep (less idle)",
                "GiB",
                _diff(asleep, idle),
                _asleep_bytes(p),
                "non-torch + CUDA graphs",
            ),
            _row(
                "sleep",
                f"level {level}: host RAM taken asleep (RSS)",
                "GiB",
                _diff(step_rss.get(f"asleep_{level}"), step_rss.get("awake_after_generate")),
                g["weights_bytes"] if level == 1 else 0,
                "level 1 keeps the weights in host RAM, level 2 drops them",
            ),
            _row(
                "sleep",
                f"level {level}: host RAM taken asleep (MemAvailable drop)",
                "GiB",
                _diff(step_avail.get("awake_after_generate"), step_avail.get(f"asleep_{level}")),
                g["weights_bytes"] if level == 1 else 0,
            ),
            _row(
                "sleep",
                f"level {level}: sleep / wake seconds",
                "s",
                lv.get("sleep_s"),
                None,
                f"wake {lv.get('wake_s')} s"
                + (f", reload {lv.get('reload_s')} s" if "reload_s" in lv else ""),
            ),
            _row(
                "sleep",
                f"level {level}: same tokens after wake",
                "",
                lv.get("same_tokens_as_before"),
                None,
                lv.get("reload_error", ""),
            ),
        ]
    return rows


def _gib(v: float | None) -> float | None:
    return None if v is None else v * GIB


def _round2(run: Mapping[str, Any] | None) -> dict[str, float]:
    """Round 2's prompt tokens and where its cached tokens came from (counter deltas over the round)."""
    snaps = (((run or {}).get("result") or {}).get("metrics")) or {}
    a, b = snaps.get("round1"), snaps.get("round2")
    if a is None or b is None:
        return {}
    out = {
        "prompt_tokens": _counter(b, "vllm:prompt_tokens") - _counter(a, "vllm:prompt_tokens"),
        "gpu_hits": _counter(b, "vllm:prefix_cache_hits") - _counter(a, "vllm:prefix_cache_hits"),
        "external_hits": _counter(b, "vllm:external_prefix_cache_hits")
        - _counter(a, "vllm:external_prefix_cache_hits"),
    }
    for source in ("device", "host"):
        out[f"cached_{source}"] = _counter(
            b, "vllm:prompt_tokens_cached_by_source", source=source
        ) - _counter(a, "vllm:prompt_tokens_cached_by_source", source=source)
    return out


def _tier(res: Mapping[str, Any], args: Mapping[str, Any], p: Mapping[str, Any]) -> dict[str, Any]:
    """The fleet's host tier for the run's --kv-offloading-size on the run's host (its MemTotal)."""
    memtotal = next(
        (s.get("MemTotal_bytes") for s in res.get("steps") or [] if s.get("MemTotal_bytes")), None
    )
    return kv_offload(
        [{"name": "m", "kv_offload": args["kv_offloading_size"]}],
        (memtotal or 0) // MIB or 128 * 1024,
        VLLM,
        {"m": p["per_gpu"]["weights_bytes"]},
        {"m": 1},
    )["m"]


def kv_rows(
    on: Mapping[str, Any] | None, off: Mapping[str, Any] | None, gpu: Mapping[str, Any]
) -> list[dict]:
    rows = [r for r in (_failed("kv_offload", on), _failed("kv_offload_off", off)) if r]
    if on is None or not on.get("result"):
        return rows
    res, log = on["result"], on["log"]
    args = _args(on, "kv_offload")
    p = _plan(gpu, args)
    per_token = int(p["kv_bytes_per_token"])
    try:
        predicted = _tier(res, args, p)
    except Exception as exc:  # noqa: BLE001  # the fleet's refusal is a finding too
        return [*rows, _row("kv_offload", "fleet's kv_offload sizing", "", "REFUSED", None, str(exc)[:200])]
    tier = predicted["per_rank_gib"] * GIB
    shm = _diff(_step(res, "awake").get("Shmem_bytes"), _step(res, "before_start").get("Shmem_bytes"))
    work = res.get("workload") or {}
    n, plen = int(work.get("prompts_per_round") or 0), int(work.get("prefix_tokens") or 0)
    # every full prefix block comes back from the tier when the round's working set fits in it
    fits = n * (plen + int(work.get("tail_tokens") or 0)) * per_token <= tier
    expect_host = n * plen if fits else int(tier // per_token)
    r_on, r_off = _round2(on), _round2(off)
    rows += [
        _row("kv_offload", "offloading spec (vLLM's log)", "", log.get("offload_spec"), "CPUOffloadingSpec"),
        *_tier_rows("kv_offload", predicted, log, tier, shm),
        _row(
            "kv_offload",
            "GPU KV cache tokens (capped)",
            "tokens",
            work.get("gpu_cache_tokens"),
            None,
            f"{n} prompts of {plen}+{work.get('tail_tokens')} tokens a round",
        ),
        _row(
            "kv_offload",
            "round 2: prompt tokens cached from host",
            "tokens",
            r_on.get("cached_host"),
            expect_host,
            "fits the tier" if fits else "the tier holds less than the working set",
        ),
        _row(
            "kv_offload",
            "round 2: prompt tokens cached on the GPU",
            "tokens",
            r_on.get("cached_device"),
            None,
        ),
    ]
    for label, r in (("with the tier", r_on), ("without", r_off)):
        if r.get("prompt_tokens"):
            hit = (r["gpu_hits"] + r["external_hits"]) / r["prompt_tokens"]
            rows.append(_row("kv_offload", f"round 2 hit rate {label}", "", round(hit, 4), None))
    t_on, t_off = res.get("round2_s"), ((off or {}).get("result") or {}).get("round2_s")
    rows.append(
        _row("kv_offload", "round 2 seconds with / without the tier", "s", t_on, None, f"without {t_off} s")
    )
    return rows


def ngram_rows(
    on: Mapping[str, Any] | None, off: Mapping[str, Any] | None, gpu: Mapping[str, Any]
) -> list[dict]:
    rows = [r for r in (_failed("ngram", on), _failed("ngram_off", off)) if r]
    if on is None or not on.get("result"):
        return rows
    res, res_off = on["result"], ((off or {}).get("result") or {})
    with_draft = _plan(gpu, _args(on, "ngram"))
    spec = with_draft.get("speculative") or {}
    # the plan of the run without speculative decoding: the ngram plan's own figure before the drafter
    # (kv_cache_tokens_without_draft) keeps the warm-up's verify step, which only a speculative start runs
    without = _plan(gpu, _args(off, "ngram_off"))
    snaps = res.get("metrics") or {}
    a, b = snaps.get("before"), snaps.get("after")
    drafts = _counter(b, "vllm:spec_decode_num_drafts") - _counter(a, "vllm:spec_decode_num_drafts")
    draft_tokens = _counter(b, "vllm:spec_decode_num_draft_tokens") - _counter(
        a, "vllm:spec_decode_num_draft_tokens"
    )
    accepted = _counter(b, "vllm:spec_decode_num_accepted_tokens") - _counter(
        a, "vllm:spec_decode_num_accepted_tokens"
    )
    per_pos = [
        x - y
        for x, y in zip(
            _vector(b, "vllm:spec_decode_num_accepted_tokens_per_pos"),
            _vector(a, "vllm:spec_decode_num_accepted_tokens_per_pos") or [0.0] * 8,
            strict=False,  # no "before" vector when no draft ran yet
        )
    ]
    load_on, load_off = (
        (on.get("log") or {}).get("model_loading_gib"),
        ((off or {}).get("log") or {}).get("model_loading_gib"),
    )
    kv_on = (res.get("engine") or {}).get("kv_cache_size_tokens")
    kv_off = (res_off.get("engine") or {}).get("kv_cache_size_tokens")
    dec_on, dec_off = res.get("decode") or {}, res_off.get("decode") or {}
    rows += [
        _row(
            "ngram",
            "drafter weights (Model loading took, on - off)",
            "GiB",
            _gib(_diff(load_on, load_off)),
            spec.get("draft_weights_bytes_per_gpu"),
            spec.get("why", ""),
        ),
        _row("ngram", "KV cache tokens with ngram", "tokens", kv_on, spec.get("kv_cache_tokens")),
        _row(
            "ngram",
            "KV cache tokens without (engine)",
            "tokens",
            kv_off,
            without.get("kv_cache_tokens"),
        ),
        _row(
            "ngram",
            "GPU in use awake, on - off (nvidia-smi)",
            "GiB",
            _diff(_used(res, "awake"), _used(res_off, "awake")),
            0,
        ),
        _row(
            "ngram",
            "draft acceptance rate",
            "",
            round(accepted / draft_tokens, 4) if draft_tokens else None,
            None,
            f"{int(accepted)} of {int(draft_tokens)} draft tokens, {int(drafts)} drafts",
        ),
        _row(
            "ngram",
            "mean acceptance length",
            "tokens",
            round(1 + accepted / drafts, 3) if drafts else None,
            None,
            "accepted per position " + ",".join(str(int(x)) for x in per_pos),
        ),
        _row(
            "ngram",
            "decode speed-up (tokens/s with / without)",
            "x",
            round(dec_on["tokens_per_s"] / dec_off["tokens_per_s"], 3)
            if dec_on.get("tokens_per_s") and dec_off.get("tokens_per_s")
            else None,
            None,
            f"{dec_on.get('tokens_per_s')} / {dec_off.get('tokens_per_s')} tok/s; distinct output tokens "
            f"{dec_on.get('distinct_output_tokens')} (dummy weights: the mechanism, not a real model's "
            "acceptance)",
        ),
    ]
    return rows


def sleep_real_rows(run: Mapping[str, Any] | None, gpu: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Level 2 on a real checkpoint, woken as the fleet's sleep controller wakes it: weights, reload, KV."""
    name = "sleep_l2_real"
    bad = _failed(name, run)
    rows = [bad] if bad else []
    if run is None or not run.get("result"):
        return rows
    res, log = run["result"], run["log"]
    p = _plan(gpu, _args(run, name), model_of(name))
    g = p["per_gpu"]
    idle = _used(res, "before_import")
    awake = _used(res, "awake_after_generate") or _used(res, "awake")
    asleep, woken = _used(res, "asleep_2"), _used(res, "woken_2")
    budget = sleep_budget([{"name": "m", "sleep": 2}], {"m": p})["bytes"]["m"]
    ck = res.get("checkpoint") or {}
    lv = res.get("level2") or {}
    rss = {s.get("step"): s.get("rss_bytes") for s in res.get("steps") or []}
    freed = (log.get("sleep_freed") or [])[:1]
    before = res.get("generate_before") or {}
    rows += [
        _row(
            name,
            "real checkpoint written (safetensors)",
            "GiB",
            ck.get("bytes"),
            g["weights_bytes"],
            f"{ck.get('tensors')} tensors, {ck.get('params')} parameters, {ck.get('s')} s"
            if ck
            else "already on the host",
        ),
        _row(
            name,
            "weights (vLLM: Model loading took)",
            "GiB",
            _gib(log.get("model_loading_gib")),
            g["weights_bytes"],
        ),
        _row(
            name,
            "GPU in use awake (nvidia-smi, less idle)",
            "GiB",
            _diff(awake, idle),
            _awake_bytes(p),
            f"gpu_memory_utilization {p['gpu_memory_utilization']} of the GPU",
        ),
        _row(
            name,
            "level 2: GPU freed (nvidia-smi)",
            "GiB",
            _diff(awake, asleep),
            budget,
            "sleep_budget: awake share - what a sleeper keeps",
        ),
        _row(
            name,
            "level 2: GPU freed (vLLM's log)",
            "GiB",
            _gib(freed[0]["freed_gib"]) if freed else None,
            budget,
        ),
        _row(name, "level 2: GPU kept asleep (less idle)", "GiB", _diff(asleep, idle), _asleep_bytes(p)),
        _row(
            name,
            "level 2: host RAM taken asleep (RSS)",
            "GiB",
            _diff(rss.get("asleep_2"), rss.get("awake_after_generate")),
            0,
            "level 2 drops the weights",
        ),
        _row(
            name,
            "woken weights: GPU in use (less asleep)",
            "GiB",
            _diff(_used(res, "woken_weights"), asleep),
            g["weights_bytes"],
            "wake_up(tags=['weights'])",
        ),
        _row(
            name,
            "woken: GPU restored (nvidia-smi, woken / awake)",
            "GiB",
            _diff(woken, idle),
            _diff(awake, idle),
            "after wake_up(weights), reload_weights, wake_up(kv_cache); predicted: as awake before",
        ),
        _row(
            name,
            "sleep / wake seconds",
            "s",
            lv.get("sleep_s"),
            None,
            f"wake {lv.get('wake_s')} s = weights {lv.get('wake_weights_s')} + reload {lv.get('reload_s')} "
            f"+ kv_cache {lv.get('wake_kv_s')}",
        ),
        _row(
            name,
            "same tokens after the level-2 wake",
            "",
            lv.get("same_tokens_as_before"),
            True,
            f"{sum(len(t) for t in before.get('tokens') or [])} greedy tokens, "
            f"{before.get('distinct_tokens')} distinct; "
            f"is_sleeping after wake {lv.get('is_sleeping_after_wake')}",
        ),
        _row(
            name,
            "same weights after the level-2 wake (vLLM's sha256)",
            "",
            lv.get("same_weight_checksums"),
            True,
            lv.get("checksum_error") or f"{lv.get('weights_checksummed')} tensors, {lv.get('checksum_s')} s",
        ),
        _row(
            name,
            "wake_up(weights) / wake_up(kv_cache) said fully awake",
            "",
            f"{lv.get('wake_weights_fully_awake')} / {lv.get('wake_kv_fully_awake')}",
            "False / True",
            "; ".join(f"{k}: {v}" for k, v in lv.items() if k.endswith("_error"))[:300],
        ),
    ]
    return rows


def _ttft(run: Mapping[str, Any] | None, rnd: str) -> dict[str, Any]:
    return (((run or {}).get("result") or {}).get(f"{rnd}_summary")) or {}


def ttft_rows(
    on: Mapping[str, Any] | None, off: Mapping[str, Any] | None, gpu: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Round 2's time to first token, long prefixes gone from the GPU: loaded from the tier or prefilled."""
    rows = [r for r in (_failed("kv_ttft", on), _failed("kv_ttft_off", off)) if r]
    if on is None or not on.get("result"):
        return rows
    res, log = on["result"], on["log"]
    args = _args(on, "kv_ttft")
    p = _plan(gpu, args, model_of("kv_ttft"))
    per_token = int(p["kv_bytes_per_token"])
    work = res.get("workload") or {}
    n, plen = int(work.get("prompts_per_round") or 0), int(work.get("prefix_tokens") or 0)
    tail = int(work.get("tail_tokens") or 0)
    try:
        predicted = _tier(res, args, p)
    except Exception as exc:  # noqa: BLE001  # the fleet's refusal is a finding too
        return [*rows, _row("kv_ttft", "fleet's kv_offload sizing", "", "REFUSED", None, str(exc)[:200])]
    tier = predicted["per_rank_gib"] * GIB
    shm = _diff(_step(res, "awake").get("Shmem_bytes"), _step(res, "before_start").get("Shmem_bytes"))
    fits = n * (plen + tail) * per_token <= tier
    r_on, r_off = _round2(on), _round2(off)
    s_on, s_off = _ttft(on, "round2"), _ttft(off, "round2")
    f_on, f_off = _ttft(on, "round1"), _ttft(off, "round1")
    med_on, med_off = s_on.get("median_s"), s_off.get("median_s")
    rows += [
        *_tier_rows("kv_ttft", predicted, log, tier, shm),
        _row(
            "kv_ttft",
            "working set of a round (KV bytes)",
            "GiB",
            n * (plen + tail) * per_token,
            tier,
            f"{n} prompts of {plen}+{tail} tokens x {per_token} B/token (planner); "
            f"GPU cache capped at {work.get('gpu_cache_tokens')} tokens",
        ),
        _row(
            "kv_ttft",
            "round 2: prompt tokens cached from host",
            "tokens",
            r_on.get("cached_host"),
            n * plen if fits else int(tier // per_token),
            "fits the tier" if fits else "the tier holds less than the working set",
        ),
        _row(
            "kv_ttft", "round 2: prompt tokens cached on the GPU", "tokens", r_on.get("cached_device"), None
        ),
    ]
    for label, r in (("with the tier", r_on), ("without", r_off)):
        if r.get("prompt_tokens"):
            hit = (r["gpu_hits"] + r["external_hits"]) / r["prompt_tokens"]
            rows.append(_row("kv_ttft", f"round 2 hit rate {label}", "", round(hit, 4), None))
    rows += [
        _row(
            "kv_ttft",
            "round 2 TTFT median with the tier",
            "s",
            med_on,
            None,
            f"round 1 {f_on.get('median_s')} s; vLLM's own: median {s_on.get('vllm_ttft_median_s')} s, "
            f"histogram mean {s_on.get('vllm_ttft_hist_mean_s')} s",
        ),
        _row(
            "kv_ttft",
            "round 2 TTFT median without",
            "s",
            med_off,
            None,
            f"round 1 {f_off.get('median_s')} s; vLLM's own: median {s_off.get('vllm_ttft_median_s')} s, "
            f"histogram mean {s_off.get('vllm_ttft_hist_mean_s')} s",
        ),
        _row(
            "kv_ttft",
            "round 2 TTFT with / without the tier",
            "x",
            round(med_on / med_off, 3) if med_on and med_off else None,
            None,
            f"{round(med_off / med_on, 2) if med_on and med_off else '-'}x faster with the tier",
        ),
    ]
    return rows


def platform_rows(runs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Whether each feature ran on the GPU next to platform.problems' word for a CUDA image: it lets sleep and
    the native tier through (it refuses them only for a CPU build) and ngram everywhere."""
    cuda = [{"RepoTags": ["vllm:cuda"], "Config": {"Labels": {CUDA_LABEL: "13.0"}}}]
    specs = {
        "sleep": {"sleep_level": 1},
        "kv_offload": {"kv_offload": {"backend": "native"}},
        "ngram": {},
        "sleep_l2_real": {"sleep_level": 2},
        "kv_ttft": {"kv_offload": {"backend": "native"}},
    }
    rows = []
    for name, spec in specs.items():
        if name in runs:
            refused = problems(cuda, {"name": "m", "image": "vllm:cuda", **spec})
            ran = "ran" if (runs[name].get("result") or {}).get("ok") else "failed"
            rows.append(
                _row(name, "runs on a CUDA GPU (platform check)", "", ran, "refused" if refused else "ran")
            )
    return rows


def report(outdir: Path) -> list[dict[str, Any]]:
    runs = load(outdir)
    gpu = gpu_of(runs)
    return [
        *platform_rows(runs),
        *sleep_rows(runs.get("sleep"), gpu),
        *kv_rows(runs.get("kv_offload"), runs.get("kv_offload_off"), gpu),
        *ngram_rows(runs.get("ngram"), runs.get("ngram_off"), gpu),
        *sleep_real_rows(runs.get("sleep_l2_real"), gpu),
        *ttft_rows(runs.get("kv_ttft"), runs.get("kv_ttft_off"), gpu),
    ]


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def format_rows(rows: list[dict[str, Any]]) -> str:
    head = ("feature", "figure", "unit", "measured", "predicted", "ratio", "note")
    table = [head, *[tuple(_cell(r[k]) for k in head) for r in rows]]
    widths = [max(len(t[i]) for t in table) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(t[:-1], widths, strict=True))
        + ("  " + t[-1] if t[-1] != "-" else "")
        for t in table
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 1
    where = Path(argv[0])
    with tempfile.TemporaryDirectory() as tmp:
        if where.is_file():  # the archive the device command brings back
            with tarfile.open(where) as tar:
                if hasattr(tarfile, "data_filter"):  # Python 3.12, and 3.11.4 on
                    tar.extractall(tmp, filter="data")
                else:
                    tar.extractall(tmp)  # noqa: S202  # our own archive from the device
            where = next((p.parent for p in Path(tmp).rglob("*.log")), Path(tmp))
        rows = report(where)
    print(json.dumps(rows, indent=1) if "--json" in argv[1:] else format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
