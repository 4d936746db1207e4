"""What the lab's CPU build of vLLM does with the per-model features of #28, each launched with the exact
`vllm serve` arguments the vllm_server role renders for the lab's tiny model (its lab plan, parsers and
extra_args; the feature's flags and environment from fleet_serving), one container pinned to one core.

    flock /tmp/vllm-fleet-heavy.lock env PYTHONPATH=collections ~/.cache/vllm-fleet/venv/bin/python \\
        tests/lab/features_cpu.py ngram|offload|sleep [--core 1] [--out DIR]

ngram: completions with the official openai client, then vLLM's spec-decode counters and its
"SpecDecoding metrics" log lines. offload: a prompt, the device prefix cache reset, the same prompt again,
then the per-tier prefix-cache counters. sleep: POST /sleep, GET /is_sleeping, POST /wake_up, timed.
A feature the CPU build refuses is reported with vLLM's own error. DIR gets the log and /metrics.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import labkit  # this folder: the script's own path
import openai
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import (
    deploy,
    kv_offload,
    model_features,
)

VERSION = "0.32.0"
MODEL = "/models/tiny"  # the lab's tiny model, baked into the image as the lab hub serves it
# the lab's plan for tiny (what lab-gpu1-vllm-tiny runs: inventories/lab, overrides of gpu_nodes)
PLANNED = ["--tensor-parallel-size", "1", "--max-model-len", "512", "--max-num-seqs", "16",
           "--max-num-batched-tokens", "8192", "--dtype", "float32", "--enforce-eager",
           "--kv-cache-memory-bytes", "67108864"]  # fmt: skip
EXTRA = ["--default-chat-template-kwargs", '{"enable_thinking": false}']
SETTINGS = {
    "ngram": {"speculative": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}},
    "offload": {"kv_offload": 1},
    "sleep": {"sleep": 1},
}
KEY = "lab-features-key-0123456789"
# the lines of vLLM's log worth quoting
QUOTE = re.compile(r"SpecDecoding metrics|Error|error:|not supported|OffloadingConnector|KV Transfer|"
                   r"sleep|Sleep|wake|prefix cache hit rate", re.I)  # fmt: skip


sh = labkit.sh


def http(method: str, url: str, timeout: float = 120) -> tuple[int, str]:
    return labkit.http(method, url, KEY, timeout=timeout)


def image_file(image: str, path: str) -> str:
    return sh("docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", image, path, check=False)


def rendered(image: str, feature: str) -> tuple[list[str], dict[str, str]]:
    """The role's `vllm serve` arguments and environment for tiny with the feature on (preflight.yml)."""
    config = json.loads(image_file(image, f"{MODEL}/config.json"))
    tokenizer = json.loads(image_file(image, f"{MODEL}/tokenizer_config.json") or "{}")
    template = image_file(image, f"{MODEL}/chat_template.jinja")
    if template:
        tokenizer["chat_template"] = template
    settings = {"name": "tiny", **SETTINGS[feature]}
    features = model_features.model_features(config, tokenizer, settings, VERSION, "tiny")
    memtotal_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    offload = kv_offload.kv_offload([settings], memtotal_mb, VERSION, {"tiny": 0}, {"tiny": 1}).get(
        "tiny", {}
    )
    command = deploy.vllm_command(MODEL, "tiny", "0.0.0.0", 8000, PLANNED, EXTRA, 60, VERSION, (),
                                  features["args"] + offload.get("args", []))  # fmt: skip
    return command, {**features["env"], **offload.get("env", {})}


def metrics(base: str, pattern: str) -> list[str]:
    _code, text = http("GET", f"{base}/metrics")
    return [line for line in text.splitlines() if re.search(pattern, line) and not line.startswith("#")]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("feature", choices=sorted(SETTINGS))
    parser.add_argument("--image", default="vllm-fleet/vllm-cpu:0.32.0")
    parser.add_argument("--core", default="1")
    parser.add_argument("--ready-timeout", type=int, default=420)
    parser.add_argument("--out", default="/tmp")
    args = parser.parse_args()
    name = f"vf-feature-{args.feature}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command, env = rendered(args.image, args.feature)
    print(f"vllm serve {' '.join(command)}\nenv {env}", flush=True)
    sh("docker", "rm", "-f", name, check=False)
    # the harness's own: the API key, the core as the lab binds it, and dev mode for the offload check's
    # /reset_prefix_cache
    env = {**env, "VLLM_API_KEY": KEY, "VLLM_CPU_OMP_THREADS_BIND": args.core}
    if args.feature == "offload":
        env["VLLM_SERVER_DEV_MODE"] = "1"
    envs = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
    started = time.monotonic()
    sh("docker", "run", "-d", "--name", name, "--cpuset-cpus", args.core, "--shm-size", "1g", *envs,
       args.image, *command)  # fmt: skip
    addr = sh("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
    base = f"http://{addr}:8000"
    up = False
    while time.monotonic() - started < args.ready_timeout:
        if http("GET", f"{base}/health", 5)[0] == 200:
            up = True
            break
        if sh("docker", "inspect", "-f", "{{.State.Status}}", name, check=False) == "exited":
            break
        time.sleep(3)
    print(f"ready: {up} after {time.monotonic() - started:.0f} s", flush=True)
    ok = False
    try:
        if up:
            ok = {"ngram": check_ngram, "offload": check_offload, "sleep": check_sleep}[args.feature](base)
            (out / f"{name}.metrics").write_text(http("GET", f"{base}/metrics")[1])
            time.sleep(11)  # vLLM logs its stats every 10 s
    finally:
        done = subprocess.run(["docker", "logs", name], capture_output=True, text=True, check=False)
        log = done.stdout + done.stderr
        (out / f"{name}.log").write_text(log)
        print("--- vLLM's log, the lines that matter:")
        print("\n".join(line for line in log.splitlines() if QUOTE.search(line))[-6000:])
        if not up:
            print("--- the end of vLLM's log:\n" + "\n".join(log.splitlines()[-15:]))
        sh("docker", "rm", "-f", name, check=False)
    return 0 if ok else 1


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=300)


def check_ngram(base: str) -> bool:
    api = client(base)
    # a prompt that repeats itself: the n-gram proposer drafts from it
    prompt = " ".join(["one two three four five six seven eight"] * 12)
    usage = []
    for _ in range(3):
        done = api.completions.create(model="tiny", prompt=prompt, max_tokens=48, temperature=0)
        usage.append(done.usage.completion_tokens)
    chat = api.chat.completions.create(model="tiny", messages=[{"role": "user", "content": prompt}],
                                       max_tokens=16, temperature=0)  # fmt: skip
    print(f"completions: {usage} tokens; chat: {chat.usage.completion_tokens} tokens", flush=True)
    found = metrics(base, r"^vllm:spec_decode")
    print("\n".join(found))
    drafts = sum(
        float(line.split()[-1]) for line in found if line.startswith("vllm:spec_decode_num_drafts_total")
    )
    return all(u == 48 for u in usage) and drafts > 0


def check_offload(base: str) -> bool:
    api = client(base)
    prompt = " ".join(f"w{i}" for i in range(300))  # about 20 blocks of 16 tokens
    first = api.completions.create(model="tiny", prompt=prompt, max_tokens=4, temperature=0)
    time.sleep(2)  # the offloading connector stores the blocks after the request finishes
    reset = http("POST", f"{base}/reset_prefix_cache")
    print(f"POST /reset_prefix_cache: {reset[0]}", flush=True)
    again = api.completions.create(model="tiny", prompt=prompt, max_tokens=4, temperature=0)
    print(f"prompt tokens {first.usage.prompt_tokens}, {again.usage.prompt_tokens}; cached: "
          f"{again.usage.prompt_tokens_details}", flush=True)  # fmt: skip
    found = metrics(
        base, r"^vllm:(prompt_tokens_cached_by_source|external_prefix_cache|prefix_cache_hits|kv_offload)"
    )
    print("\n".join(found))
    host = [
        line
        for line in found
        if 'source="host"' in line or line.startswith("vllm:external_prefix_cache_hits")
    ]
    return any(float(line.split()[-1]) > 0 for line in host)


def check_sleep(base: str) -> bool:
    api = client(base)
    api.completions.create(model="tiny", prompt="hello", max_tokens=4)
    t0 = time.monotonic()
    asleep = http("POST", f"{base}/sleep?level=1")
    took = time.monotonic() - t0
    print(f"POST /sleep?level=1: {asleep} in {took:.2f} s; /is_sleeping {http('GET', f'{base}/is_sleeping')}")
    t0 = time.monotonic()
    woke = http("POST", f"{base}/wake_up")
    took = time.monotonic() - t0
    print(f"POST /wake_up: {woke} in {took:.2f} s; /is_sleeping {http('GET', f'{base}/is_sleeping')}")
    done = api.completions.create(model="tiny", prompt="hello", max_tokens=4)
    return asleep[0] == 200 and woke[0] == 200 and done.usage.completion_tokens == 4


if __name__ == "__main__":
    sys.exit(main())
