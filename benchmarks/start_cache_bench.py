#!/usr/bin/env python3
"""How much faster a vLLM container starts when the host keeps vLLM's compile caches (#26 fast starts).

Starts the lab's CPU vLLM with the tiny model again and again, one container at a time, each pinned to one
core (--cpuset-cpus), and times each from `docker run` to the first answer of /v1/completions (the official
openai client, no retries), with vLLM's own "init engine ... took" beside it:

  cache, empty   the image's cache folder mounted as the vllm_server role mounts it (the mount point and
                 environment of fleet_serving/start_cache), empty: the first container of an image on a host
  cache, warm    the same folder again: what every later container of that image on the host gets
  no cache       no mount (the role before #26, or vllm_server_cache_root: ''): every start is a first start

The warm and no-cache starts alternate (--repeat pairs, after the empty one), so that a busy machine weighs on
both alike; it prints every start, the medians, their ratio, vLLM's compile lines and what the folder holds.
--mode compiled (default) starts vLLM as GPU hosts run it (torch.compile on; on the CPU build Inductor
compiles C++), --mode eager with the lab's plan (--enforce-eager; Inductor still compiles the sampler).
The weights are the image's own (/models/tiny), read from the page cache after the first start in every arm.

    flock /tmp/vllm-fleet-heavy.lock env PYTHONPATH=collections ~/.cache/vllm-fleet/venv/bin/python \\
        benchmarks/start_cache_bench.py [--image IMAGE] [--mode compiled|eager] [--repeat 3] [--core 1] \\
        [--out DIR]

Everything it creates is named vf-start-bench* and removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import openai
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, start_cache

NAME = "vf-start-bench"
KEY = "start-bench-key-0123456789"
MODEL = "/models/tiny"  # baked into the lab image
# the lab's plan for tiny (inventories/lab, gpu_nodes' overrides), without --enforce-eager in compiled mode
PLANNED = ["--tensor-parallel-size", "1", "--max-model-len", "512", "--max-num-seqs", "16",
           "--dtype", "float32", "--kv-cache-memory-bytes", "67108864"]  # fmt: skip
# vLLM's lines about compiling and its caches, quoted per start
QUOTE = re.compile(r"torch\.compile|compil|cache|init engine|Loading weights took|Model loading took", re.I)


def sh(*args: str, check: bool = True) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and done.returncode:
        raise SystemExit(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def image_env(image: str) -> list[str]:
    return json.loads(sh("docker", "image", "inspect", "-f", "{{json .Config.Env}}", image)) or []


def start(image: str, command: list[str], core: str, cache: Path | None, timeout: float) -> tuple[float, str]:
    """Seconds from `docker run` to the first completion (nan when none came), and vLLM's log."""
    sh("docker", "rm", "-f", NAME, check=False)
    env = {"VLLM_API_KEY": KEY, "VLLM_CPU_OMP_THREADS_BIND": core}
    mount: list[str] = []
    if cache is not None:
        env |= start_cache.cache_env(image_env(image))
        mount = ["-v", f"{cache}:{start_cache.CONTAINER_DIR}:rw"]
    envs = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
    began = time.monotonic()
    sh("docker", "run", "-d", "--name", NAME, "--cpuset-cpus", core, "--shm-size", "1g", *envs, *mount,
       image, *command)  # fmt: skip
    addr = sh("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", NAME)
    api = openai.OpenAI(base_url=f"http://{addr}:8000/v1", api_key=KEY, max_retries=0, timeout=30)
    took = float("nan")
    while time.monotonic() - began < timeout:
        try:
            answer = api.completions.create(model="tiny", prompt="Hello", max_tokens=1)
            if answer.choices:
                took = time.monotonic() - began
                break
        except openai.APIError:
            pass
        if sh("docker", "inspect", "-f", "{{.State.Status}}", NAME, check=False) == "exited":
            break
        time.sleep(0.5)
    done = subprocess.run(["docker", "logs", NAME], capture_output=True, text=True, check=False)
    sh("docker", "rm", "-f", NAME, check=False)
    return took, done.stdout + done.stderr


def folder_summary(path: Path) -> str:
    size = sh("du", "-sh", str(path)).split()[0]
    tops = sorted(p.name for p in path.iterdir())
    return f"{size} in {', '.join(tops) or 'nothing'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    default_image = os.environ.get("VLLM_FLEET_VLLM_IMAGE", "vllm-fleet/vllm-cpu:0.32.0")
    parser.add_argument("--image", default=default_image)
    parser.add_argument("--mode", choices=("compiled", "eager"), default="compiled")
    parser.add_argument("--core", default="1")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--repeat", type=int, default=3, help="warm / no-cache pairs after the empty start")
    parser.add_argument("--out", type=Path, default=Path("/tmp/vf-start-bench"))
    args = parser.parse_args()
    planned = PLANNED + (["--enforce-eager"] if args.mode == "eager" else [])
    command = deploy.vllm_command(MODEL, "tiny", "0.0.0.0", 8000, planned)  # noqa: S104 (container's bridge)
    cache = Path(f"/tmp/{NAME}-cache")
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(mode=0o700)
    args.out.mkdir(parents=True, exist_ok=True)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.image}, {args.mode}, core {args.core}, load average {load}", flush=True)
    print(f"vllm serve {' '.join(command)}", flush=True)
    runs = [("cache, empty", cache)] + [("cache, warm", cache), ("no cache", None)] * args.repeat
    results: list[tuple[str, float, float]] = []
    try:
        for number, (label, folder) in enumerate(runs, 1):
            took, log = start(args.image, command, args.core, folder, args.timeout)
            engine = re.findall(r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+)", log)
            results.append((label, took, float(engine[-1]) if engine else float("nan")))
            (args.out / f"{args.mode}-{number}-{re.sub(r'[^a-z0-9]+', '-', label)}.log").write_text(log)
            print(f"\n{number}. {label}: first completion after {took:.1f} s", flush=True)
            print("\n".join(f"  {line[-200:]}" for line in log.splitlines() if QUOTE.search(line))[-3000:])
            if folder is not None:
                print(f"  cache folder: {folder_summary(folder)}", flush=True)
    finally:
        sh("docker", "rm", "-f", NAME, check=False)
        shutil.rmtree(cache, ignore_errors=True)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{args.mode}, one core (load average at the end {load}): first completion after docker run, "
          "and vLLM's init engine, in s")  # fmt: skip
    for number, (label, took, engine) in enumerate(results, 1):
        print(f"  {number}. {label:<13} {took:7.1f}  {engine:6.1f}")
    warm = [r for r in results if r[0] == "cache, warm"]
    cold = [r for r in results if r[0] == "no cache"]
    if warm and cold:
        for what, index in (("first completion", 1), ("init engine", 2)):
            before = statistics.median(r[index] for r in cold)
            after = statistics.median(r[index] for r in warm)
            if before < 1:  # eager: the engine's init compiles nothing, the sampler compiles later
                continue
            print(f"median {what}: {before:.1f} s without the cache, {after:.1f} s with it warm: "
                  f"{after / before:.2f}x the time ({before - after:.1f} s saved)")  # fmt: skip
    return 0 if all(r[1] == r[1] for r in results) else 1  # nan: a start that never answered


if __name__ == "__main__":
    sys.exit(main())
