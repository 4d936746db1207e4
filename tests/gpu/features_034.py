"""Prove the per-model features of issue #28 on a real GPU with vLLM 0.34.0: sleep mode, the native KV tier in
host RAM and ngram speculative decoding, each in its own process group with its own time limit.

usage: python3 tests/gpu/features_034.py OUTDIR [NAME ...]   (after `source tests/gpu/host_setup.sh`)
NAME: the features below (default: all, in that order). Writes OUTDIR/NAME.log, OUTDIR/NAME.json (what the
child measured, written after every step, so a timeout keeps what was done) and OUTDIR/features.json (rc and
seconds per feature, the GPU). FEATURE_LIMIT_S (default 150) bounds one feature, FEATURES_TOTAL_S (default
470) all of them: a feature gets what is left, one with under 40 s left is skipped. FEATURE_EXTRA (JSON, name
-> engine args) adds to or overrides a feature's engine args.
tests/gpu/features_report.py OUTDIR sets the figures next to the fleet's predictions.

As tests/gpu/record_034.py: a real config.json from tests/data/model-configs, vLLM's dummy weights
(load_format="dummy") and no tokenizer (skip_tokenizer_init=True, prompts as token ids, detokenize=False),
only vLLM's public offline API (LLM, SamplingParams, LLM.get_metrics, sleep, wake_up, collective_rpc).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from record_034 import (  # this folder: the script's own path
    model_dir,
    plain_lines,
    run_in_group,
    smi_used,
    wait_idle,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "model-configs"
MODEL = "meta-llama__Llama-3.2-3B"
BASE = {"max_model_len": 4096, "enforce_eager": True}
# a model sharing its GPU with another, as the fleet's sleepers do
SHARED = {**BASE, "gpu_memory_utilization": 0.45}
# the GPU cache capped at 144 blocks of 64 tokens (9,216 tokens) so that the prefix workload (12 x 2,080
# tokens) is 2.7x the GPU cache but fits the 4 GiB host tier (about 37,000 tokens of Llama-3.2-3B's
# 112 KiB per token)
CAPPED = {**BASE, "num_gpu_blocks_override": 144}
OFFLOAD_GIB = 4
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}

# name: (mode, engine args)
FEATURES = {
    "sleep": ("sleep", {**SHARED, "enable_sleep_mode": True}),
    "kv_offload": (
        "prefix",
        {**CAPPED, "kv_offloading_size": OFFLOAD_GIB, "kv_offloading_backend": "native"},
    ),
    "kv_offload_off": ("prefix", CAPPED),
    "ngram": ("decode", {**SHARED, "speculative_config": NGRAM}),
    "ngram_off": ("decode", SHARED),
}

CHILD = r"""
import json, os, random, subprocess, sys, time, traceback
mode, model, args, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
res = {"mode": mode, "model": model, "args": args, "steps": []}


def save():
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1, default=str)
    os.replace(tmp, out)


def smi():
    try:
        line = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total,name",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=20).stdout.splitlines()[0]
        used, total, name = [p.strip() for p in line.split(",", 2)]
        return {"smi_used_mib": int(used), "smi_total_mib": int(total), "gpu": name}
    except Exception as e:
        return {"smi_error": str(e)}


def host():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            if k in ("MemTotal", "MemAvailable", "Shmem", "Mlocked"):
                info[k + "_bytes"] = int(v.split()[0]) * 1024
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                info["rss_bytes"] = int(line.split()[1]) * 1024
    st = os.statvfs("/dev/shm")
    info["shm_size_bytes"] = st.f_blocks * st.f_frsize
    return info


def mem(label, **extra):
    m = {"step": label, "t": round(time.time() - T0, 2), **smi(), **host(), **extra}
    try:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            free, total = torch.cuda.mem_get_info()
            m["torch_used_bytes"], m["torch_total_bytes"] = total - free, total
    except Exception as e:
        m["torch_error"] = str(e)
    res["steps"].append(m)
    save()
    print("STEP", json.dumps(m), flush=True)
    return m


def metrics(llm):
    try:
        got = llm.get_metrics()
    except Exception as e:  # read the registry as Prometheus would scrape it, which get_metrics digests
        res.setdefault("get_metrics_errors", []).append(f"{type(e).__name__}: {e}")
        from prometheus_client import REGISTRY
        return [{"name": s.name[:-6] if s.name.endswith("_total") else s.name,
                 "labels": {k: v for k, v in s.labels.items() if k not in ("model_name", "engine")},
                 "value": s.value}
                for m in REGISTRY.collect() if m.name.startswith("vllm:") and m.type in ("counter", "gauge")
                for s in m.samples if not s.name.endswith("_created")]
    out = []
    for m in got:
        labels = {k: v for k, v in m.labels.items() if k not in ("model_name", "engine")}
        d = {"name": m.name, "labels": labels}
        if hasattr(m, "value"):
            d["value"] = m.value
        elif hasattr(m, "values"):
            d["values"] = list(m.values)
        if hasattr(m, "count"):
            d["count"], d["sum"] = m.count, m.sum
        out.append(d)
    return out


def generate(llm, prompts, sp):
    t = time.time()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    dt = time.time() - t
    toks = [list(o.outputs[0].token_ids) for o in outs]
    return dt, toks


T0 = time.time()
try:
    mem("before_import")
    import torch, vllm
    from vllm import LLM, SamplingParams
    res["versions"] = {"vllm": vllm.__version__, "torch": torch.__version__, "cuda": torch.version.cuda}
    print("VERSIONS", json.dumps(res["versions"]), flush=True)
    mem("before_start")
    t = time.time()
    llm = LLM(model=model, load_format="dummy", skip_tokenizer_init=True, disable_log_stats=False, seed=0,
              **args)
    res["start_s"] = round(time.time() - t, 1)
    cfg = llm.llm_engine.vllm_config
    cc = cfg.cache_config
    res["engine"] = {
        "num_gpu_blocks": cc.num_gpu_blocks, "block_size": cc.block_size,
        "kv_cache_size_tokens": getattr(cc, "kv_cache_size_tokens", None),
        "gpu_memory_utilization": cc.gpu_memory_utilization,
        "extensible": cc.enable_extensible_kv_cache,
        "max_model_len": cfg.model_config.max_model_len,
        "max_num_seqs": cfg.scheduler_config.max_num_seqs,
        "max_num_batched_tokens": cfg.scheduler_config.max_num_batched_tokens,
        "kv_connector": cfg.kv_transfer_config.kv_connector if cfg.kv_transfer_config else None,
        "kv_connector_extra_config": dict(cfg.kv_transfer_config.kv_connector_extra_config)
        if cfg.kv_transfer_config else None,
        "speculative": str(cfg.speculative_config) if cfg.speculative_config else None,
    }
    mem("awake")
    rng = random.Random(0)
    greedy = dict(temperature=0.0, ignore_eos=True, detokenize=False)

    if mode == "sleep":
        prompts = [[rng.randrange(100, 100000) for _ in range(128)] for _ in range(4)]
        sp = SamplingParams(max_tokens=16, **greedy)
        dt, first = generate(llm, prompts, sp)
        res["generate_before"] = {"s": round(dt, 2), "tokens": first[0]}
        mem("awake_after_generate")
        for level in (1, 2):
            key = f"level{level}"
            res[key] = {}
            t = time.time()
            llm.sleep(level=level)
            res[key]["sleep_s"] = round(time.time() - t, 2)
            mem(f"asleep_{level}")
            t = time.time()
            llm.wake_up()
            res[key]["wake_s"] = round(time.time() - t, 2)
            mem(f"woken_{level}")
            if level == 2:
                # level 2 dropped the weights: reload them (the dummy loader again) before generating
                t = time.time()
                try:
                    llm.collective_rpc("reload_weights")
                    res[key]["reload_s"] = round(time.time() - t, 2)
                except Exception as e:
                    res[key]["reload_error"] = f"{type(e).__name__}: {e}"
                mem("reloaded_2")
            dt, again = generate(llm, prompts, sp)
            res[key]["generate_s"] = round(dt, 2)
            res[key]["same_tokens_as_before"] = again == first
            save()

    elif mode == "prefix":
        # 12 prefixes of 2,048 tokens (32 blocks of 64), each asked twice with a different 32-token tail: the
        # second round finds a prefix only where a cache still holds it
        n, plen = 12, 2048
        prefixes = [[rng.randrange(100, 100000) for _ in range(plen)] for _ in range(n)]
        sp = SamplingParams(max_tokens=4, **greedy)
        res["workload"] = {"prompts_per_round": n, "prefix_tokens": plen, "tail_tokens": 32,
                           "gpu_cache_tokens": (cc.num_gpu_blocks or 0) * cc.block_size}
        snaps = {"start": metrics(llm)}
        for rnd in ("round1", "round2"):
            prompts = [p + [rng.randrange(100, 100000) for _ in range(32)] for p in prefixes]
            dt, _ = generate(llm, prompts, sp)
            time.sleep(1.0)  # let the offload stores finish and the stats reach the logger
            snaps[rnd] = metrics(llm)
            res[rnd + "_s"] = round(dt, 2)
            mem(rnd)
        res["metrics"] = snaps

    elif mode == "decode":
        # 8 prompts, each one 16-token pattern repeated to 1,024 tokens: ngram finds its continuation
        prompts = []
        for _ in range(8):
            pat = [rng.randrange(100, 100000) for _ in range(16)]
            prompts.append((pat * 64)[:1024])
        sp = SamplingParams(max_tokens=256, **greedy)
        generate(llm, prompts[:1], SamplingParams(max_tokens=8, **greedy))  # warm-up
        before = metrics(llm)
        dt, toks = generate(llm, prompts, sp)
        time.sleep(1.0)
        res["decode"] = {"s": round(dt, 3), "output_tokens": sum(len(t) for t in toks),
                         "tokens_per_s": round(sum(len(t) for t in toks) / dt, 1),
                         "distinct_output_tokens": len({x for t in toks for x in t}),
                         "first_output": toks[0][:32]}
        res["metrics"] = {"before": before, "after": metrics(llm)}
        mem("after_decode")
    res["ok"] = True
except BaseException as e:
    res["error"] = f"{type(e).__name__}: {e}"
    res["traceback"] = traceback.format_exc()[-6000:]
    print("ERROR", res["error"], flush=True)
finally:
    res["elapsed_s"] = round(time.time() - T0, 1)
    save()
    print("DONE", flush=True)
    sys.stdout.flush()
    os._exit(0 if res.get("ok") else 1)  # the engine's shutdown is not measured; the parent kills the group
"""


def run_one(out: Path, name: str, limit: float, deadline: float, extra: dict) -> dict:
    mode, args = FEATURES[name]
    args = {**args, **extra.get(name, {})}
    mdir = model_dir(MODEL)
    used = wait_idle()
    limit = min(limit, deadline - time.time() - 5)  # the wait for an idle GPU counts against the total
    log, result = out / f"{name}.log", out / f"{name}.json"
    result.unlink(missing_ok=True)
    t = time.time()
    with log.open("w") as f:
        f.write(f"FEATURE {name} mode={mode} model={MODEL} args={json.dumps(args)} limit={limit:.0f}s\n")
        f.write(f"NVIDIA-SMI before: {used}\n")
        f.flush()
        rc = run_in_group(
            [sys.executable, "-c", CHILD, mode, str(mdir), json.dumps(args), str(result)], f, limit
        )
        f.write(f"\nEXIT {rc} after {time.time() - t:.1f}s\n")
        # a killed child leaves its host KV tier in /dev/shm (vLLM unlinks it only on a clean exit)
        for left in Path("/dev/shm").glob("vllm_offload_*.mmap*"):
            if left.stat().st_mtime >= t - 1:
                f.write(f"removed {left} ({left.stat().st_size / 1e9:.2f} GB)\n")
                left.unlink(missing_ok=True)
    plain_lines(log)
    row: dict = {"rc": rc, "seconds": round(time.time() - t, 1), "smi_before": used}
    try:
        got = json.loads(result.read_text())
        row["ok"] = bool(got.get("ok"))
        if got.get("error"):
            row["error"] = got["error"]
    except (OSError, ValueError) as e:
        row.update(ok=False, error=f"no result ({rc}): {e}")
    return row


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    names = sys.argv[2:] or list(FEATURES)
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        sys.exit(f"unknown feature(s) {', '.join(unknown)}; known: {', '.join(FEATURES)}")
    limit = float(os.environ.get("FEATURE_LIMIT_S", "150"))
    # a second attempt without editing: FEATURE_EXTRA='{"sleep": {"enable_extensible_kv_cache": false}}'
    extra = json.loads(os.environ.get("FEATURE_EXTRA") or "{}")
    deadline = time.time() + float(os.environ.get("FEATURES_TOTAL_S", "470"))
    summary: dict = {"model": MODEL, "gpu": smi_used(), "features": {}}
    for name in names:
        left = deadline - time.time()
        if left < 40:
            summary["features"][name] = {
                "rc": "skipped",
                "ok": False,
                "error": f"{left:.0f}s left of the total",
            }
        else:
            summary["features"][name] = run_one(out, name, limit, deadline, extra)
        row = summary["features"][name]
        print(name, "rc", row["rc"], f"{row.get('seconds', 0):.0f}s", row.get("error", ""), flush=True)
        (out / "features.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
