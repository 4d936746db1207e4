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
Two exceptions: sleep_l2_real writes a real safetensors checkpoint first (random, seed 0, the config's HF
tensor names; dummy weights cannot be reloaded after a level-2 sleep) and loads it with load_format="auto";
kv_ttft / kv_ttft_off use Llama-3.1-8B (dummy weights: a prefill costs the same whatever the values).
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
# The TTFT workload (kv_ttft, kv_ttft_off): 8 prefixes of 16,384 tokens on Llama-3.1-8B (128 KiB of KV per
# token: 2 GiB each), asked one at a time (max_tokens=1, so a request's time is its time to first token),
# twice, with a new 64-token tail in round 2.  The GPU cache is capped at 640 blocks of 64 (40,960 tokens,
# 2.5 prompts), so round 1 has evicted every prefix from the GPU before round 2 asks for it again; the
# working set (8 x 257 full blocks, 16.1 GiB) fits the 20 GiB host tier.  Without the tier round 2 prefills
# 16k tokens again (attention grows with the square of it); with it, it loads 2 GiB from pinned host RAM.
TTFT_MODEL = "meta-llama__Meta-Llama-3.1-8B"
TTFT_WORKLOAD = {"prompts": 8, "prefix_tokens": 16384, "tail_tokens": 64}
TTFT_CAPPED = {"max_model_len": 16512, "enforce_eager": True, "num_gpu_blocks_override": 640}
TTFT_OFFLOAD_GIB = 20
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
    # level 2 with real weights, woken as the fleet's sleep controller wakes it (vllm_fleet_sleepd.py _wake)
    "sleep_l2_real": ("sleep_l2", {**SHARED, "enable_sleep_mode": True, "load_format": "auto"}),
    "kv_ttft": (
        "ttft",
        {**TTFT_CAPPED, "kv_offloading_size": TTFT_OFFLOAD_GIB, "kv_offloading_backend": "native"},
    ),
    "kv_ttft_off": ("ttft", TTFT_CAPPED),
}
# the features on another model than MODEL
MODELS = {"kv_ttft": TTFT_MODEL, "kv_ttft_off": TTFT_MODEL}
# the features' workload, handed to the child
WORKLOADS = {"kv_ttft": TTFT_WORKLOAD, "kv_ttft_off": TTFT_WORKLOAD}
# the features that load a real checkpoint, written on the host first (WRITER)
REAL_WEIGHTS = {"sleep_l2_real"}


def model_of(name: str) -> str:
    return MODELS.get(name, MODEL)


# A real checkpoint from a Llama config.json: every tensor vLLM's LlamaForCausalLM loads, under the HF names,
# random normal (std initializer_range, seed 0, drawn on the GPU), the norms ones, in the config's dtype; one
# model.safetensors next to config.json.  Its own process: its CUDA context is gone before vLLM starts.
WRITER = r"""
import json, os, sys, time
import torch
from safetensors.torch import save_file
d = sys.argv[1]
t0 = time.time()
cfg = json.load(open(os.path.join(d, "config.json")))
h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
layers = cfg["num_hidden_layers"]
heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
hd = cfg.get("head_dim") or h // heads
dtype = getattr(torch, cfg.get("torch_dtype") or "bfloat16")
std = float(cfg.get("initializer_range") or 0.02)
dev = "cuda" if torch.cuda.is_available() else "cpu"
gen = torch.Generator(device=dev).manual_seed(0)
shapes = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
if not cfg.get("tie_word_embeddings"):
    shapes["lm_head.weight"] = (vocab, h)
for i in range(layers):
    p = f"model.layers.{i}."
    shapes.update({
        p + "self_attn.q_proj.weight": (heads * hd, h), p + "self_attn.k_proj.weight": (kv * hd, h),
        p + "self_attn.v_proj.weight": (kv * hd, h), p + "self_attn.o_proj.weight": (h, heads * hd),
        p + "mlp.gate_proj.weight": (inter, h), p + "mlp.up_proj.weight": (inter, h),
        p + "mlp.down_proj.weight": (h, inter),
        p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
    })
tensors = {}
for name, shape in shapes.items():
    if len(shape) == 1:
        t = torch.ones(shape, dtype=dtype, device=dev)
    else:
        t = torch.empty(shape, dtype=torch.float32, device=dev).normal_(0.0, std, generator=gen).to(dtype)
    tensors[name] = t.to("cpu")
del t
drawn = time.time() - t0
tmp = os.path.join(d, "model.safetensors.tmp")
save_file(tensors, tmp, metadata={"format": "pt"})
os.replace(tmp, os.path.join(d, "model.safetensors"))
size = os.path.getsize(os.path.join(d, "model.safetensors"))
print("CHECKPOINT", json.dumps({"tensors": len(tensors), "params": sum(t.numel() for t in tensors.values()),
      "bytes": size, "dtype": str(dtype), "device": dev, "draw_s": round(drawn, 1),
      "s": round(time.time() - t0, 1)}), flush=True)
"""


def real_model_dir(folder: str) -> Path:
    """A folder beside model_dir's holding config.json and, once WRITER ran, model.safetensors."""
    mdir = model_dir(folder)
    real = mdir.with_name(mdir.name + "-real")
    real.mkdir(parents=True, exist_ok=True)
    (real / "config.json").write_bytes((mdir / "config.json").read_bytes())
    return real


CHILD = r"""
import json, os, random, statistics, subprocess, sys, time, traceback
mode, model, args, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
work = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
writer = sys.argv[6] if len(sys.argv) > 6 else None  # WRITER, for the features on real weights
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


def summed(snapshot, name):  # count and sum of a histogram in a metrics snapshot
    for m in snapshot or []:
        if m.get("name") == name and "count" in m:
            return m["count"], m["sum"]
    return 0, 0.0


T0 = time.time()
try:
    if mode == "sleep_l2" and not os.path.isfile(os.path.join(model, "model.safetensors")):
        t = time.time()
        w = subprocess.run([sys.executable, "-c", writer, model], capture_output=True,
                           text=True, timeout=300)
        print(w.stdout + w.stderr, flush=True)
        got = [line for line in w.stdout.splitlines() if line.startswith("CHECKPOINT ")]
        res["checkpoint"] = {**(json.loads(got[-1][11:]) if got else {}), "rc": w.returncode,
                             "wall_s": round(time.time() - t, 1)}
        save()
        if w.returncode:
            raise RuntimeError(f"writing the checkpoint failed ({w.returncode}): {w.stderr[-500:]}")
    mem("before_import")
    import torch, vllm
    from vllm import LLM, SamplingParams
    res["versions"] = {"vllm": vllm.__version__, "torch": torch.__version__, "cuda": torch.version.cuda}
    print("VERSIONS", json.dumps(res["versions"]), flush=True)
    mem("before_start")
    t = time.time()
    llm = LLM(model=model, **{"load_format": "dummy", "skip_tokenizer_init": True, "disable_log_stats": False,
                              "seed": 0, **args})
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

    elif mode == "sleep_l2":
        # level 2 with real weights, woken step by step as the fleet's sleep controller does it
        # (roles/vllm_server/files/vllm_fleet_sleepd.py, _wake: wake_up?tags=weights, collective_rpc
        # reload_weights, wake_up?tags=kv_cache)
        prompts = [[rng.randrange(100, 100000) for _ in range(128)] for _ in range(4)]
        sp = SamplingParams(max_tokens=16, **greedy)
        dt, first = generate(llm, prompts, sp)
        res["generate_before"] = {"s": round(dt, 2), "tokens": first,
                                  "distinct_tokens": len({x for t in first for x in t})}
        mem("awake_after_generate")
        lv = res["level2"] = {}

        def digests():  # vLLM's own sha256 of every weight (Worker.compute_weight_checksums)
            t = time.time()
            try:
                got = llm.collective_rpc("compute_weight_checksums")
                lv.setdefault("checksum_s", []).append(round(time.time() - t, 2))
                return got
            except Exception as e:
                lv["checksum_error"] = f"{type(e).__name__}: {e}"
                return None

        sums_before = digests()
        steps = (("sleep_s", "asleep_2", lambda: llm.sleep(level=2)),
                 ("wake_weights_s", "woken_weights", lambda: llm.wake_up(tags=["weights"])),
                 ("reload_s", "reloaded", lambda: llm.collective_rpc("reload_weights")),
                 ("wake_kv_s", "woken_2", lambda: llm.wake_up(tags=["kv_cache"])))
        for key, step, call in steps:
            t = time.time()
            try:  # a step that fails is recorded, and the next ones still run, as the controller would not
                got = call()
                if isinstance(got, bool):
                    lv[key.replace("_s", "_fully_awake")] = got
            except Exception as e:
                lv[key.replace("_s", "_error")] = f"{type(e).__name__}: {e}"
                print("STEP ERROR", key, traceback.format_exc(), flush=True)
            lv[key] = round(time.time() - t, 2)
            mem(step)
        lv["wake_s"] = round(lv["wake_weights_s"] + lv["reload_s"] + lv["wake_kv_s"], 2)
        try:
            lv["is_sleeping_after_wake"] = llm.llm_engine.is_sleeping()
        except Exception as e:
            lv["is_sleeping_error"] = f"{type(e).__name__}: {e}"
        save()
        dt, again = generate(llm, prompts, sp)
        lv["generate_s"] = round(dt, 2)
        lv["tokens_after"] = again
        lv["same_tokens_as_before"] = again == first
        sums_after = digests()
        if sums_before is not None and sums_after is not None:
            lv["weights_checksummed"] = sum(len(d) for d in sums_before)
            lv["same_weight_checksums"] = sums_after == sums_before
        mem("after_generate_2")

    elif mode == "ttft":
        # one request at a time (max_tokens=1): a request's wall time is its time to first token; vLLM's own
        # per-request figure (RequestOutput.metrics) and its TTFT histogram are kept beside it
        n, plen, tail = work["prompts"], work["prefix_tokens"], work["tail_tokens"]
        prefixes = [[rng.randrange(100, 100000) for _ in range(plen)] for _ in range(n)]
        sp = SamplingParams(max_tokens=1, **greedy)
        res["workload"] = {"prompts_per_round": n, "prefix_tokens": plen, "tail_tokens": tail,
                           "gpu_cache_tokens": (cc.num_gpu_blocks or 0) * cc.block_size}

        def one(prompt):
            t = time.perf_counter()
            o = llm.generate([{"prompt_token_ids": prompt}], sp, use_tqdm=False)[0]
            wall = time.perf_counter() - t
            m = getattr(o, "metrics", None)
            own = getattr(m, "first_token_latency", None)
            first, arrived = getattr(m, "first_token_ts", None), getattr(m, "arrival_time", None)
            if own is None and first and arrived:
                own = first - arrived
            return {"wall_s": round(wall, 4), "vllm_ttft_s": None if own is None else round(float(own), 4),
                    "cached": getattr(o, "num_cached_tokens", None)}

        warm = one([rng.randrange(100, 100000) for _ in range(plen + tail)])  # kernels, allocator
        res["warmup"] = warm
        time.sleep(1.0)
        snaps = {"start": metrics(llm)}
        for rnd in ("round1", "round2"):
            reqs = []
            for p in prefixes:
                reqs.append(one(p + [rng.randrange(100, 100000) for _ in range(tail)]))
                res[rnd] = reqs
                save()
            time.sleep(1.0)  # let the offload stores finish and the stats reach the logger
            snaps[rnd] = metrics(llm)
            prev = snaps["start" if rnd == "round1" else "round1"]
            c0, s0 = summed(prev, "vllm:time_to_first_token_seconds")
            c1, s1 = summed(snaps[rnd], "vllm:time_to_first_token_seconds")
            own = [r["vllm_ttft_s"] for r in reqs if r["vllm_ttft_s"] is not None]
            res[rnd + "_summary"] = {
                "median_s": round(statistics.median(r["wall_s"] for r in reqs), 4),
                "sum_s": round(sum(r["wall_s"] for r in reqs), 3),
                "vllm_ttft_median_s": round(statistics.median(own), 4) if own else None,
                "vllm_ttft_hist_mean_s": round((s1 - s0) / (c1 - c0), 4) if c1 > c0 else None}
            mem(rnd)
        res["metrics"] = snaps

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
    model = model_of(name)
    mdir = real_model_dir(model) if name in REAL_WEIGHTS else model_dir(model)
    used = wait_idle()
    limit = min(limit, deadline - time.time() - 5)  # the wait for an idle GPU counts against the total
    log, result = out / f"{name}.log", out / f"{name}.json"
    result.unlink(missing_ok=True)
    t = time.time()
    with log.open("w") as f:
        f.write(f"FEATURE {name} mode={mode} model={model} args={json.dumps(args)} limit={limit:.0f}s\n")
        f.write(f"NVIDIA-SMI before: {used}\n")
        f.flush()
        work = json.dumps(WORKLOADS.get(name, {}))
        argv = [sys.executable, "-c", CHILD, mode, str(mdir), json.dumps(args), str(result), work, WRITER]
        rc = run_in_group(argv, f, limit)
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
    summary: dict = {"model": MODEL, "models": MODELS, "gpu": smi_used(), "features": {}}
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
