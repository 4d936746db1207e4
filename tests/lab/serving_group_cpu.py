"""Two simulated nodes serve one model as one replica: real vLLM CPU processes in two containers,
pipeline parallel over Gloo, launched with the exact arguments the serving-group code gives each member.

    flock /work/lab.lock python tests/lab/serving_group_cpu.py [--image vllm-fleet/vllm-cpu:0.32.0]

Prints each member's command, rank 0's answer to a completion, then kills the follower and reports
what rank 0 does (health and a completion). Removes its containers and network at the end.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, groups
from labkit import http, sh  # this folder: the script's own path

NET = "vf-serving-group"
NAMES = ("vf-sg-rank0", "vf-sg-rank1")
KEY = "serving-group-lab-key-0123456789"


def post(url: str, body: dict, timeout: float = 60) -> tuple[int, str]:
    return http("POST", url, KEY, body, timeout)


def get(url: str, timeout: float = 5) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def cleanup() -> None:
    for name in NAMES:
        sh("docker", "rm", "-f", name, check=False)
    sh("docker", "network", "rm", NET, check=False)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="vllm-fleet/vllm-cpu:0.32.0")
    parser.add_argument("--version", default="0.32.0")
    parser.add_argument("--ready-timeout", type=int, default=420)
    parser.add_argument("--logs", default="/tmp", help="folder for each member's log")
    # pp: one pipeline stage per member (what the planner gives a group); tp: tensor parallel across them
    parser.add_argument("--split", choices=("pp", "tp"), default="pp")
    # eager: --enforce-eager. dynamo: torch.compile traced once with the "eager" backend (no C++
    # compiler needed); vLLM's CPU worker runs its warm-up forward pass only when compilation is on,
    # and that pass is what allocates the buffer later pipeline stages receive activations into.
    parser.add_argument("--compile", choices=("eager", "dynamo"), default="dynamo")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="more member env")
    args = parser.parse_args()
    cleanup()
    sh("docker", "network", "create", "--subnet", "172.31.250.0/24", NET)
    addrs = {"rank0": "172.31.250.10", "rank1": "172.31.250.11"}
    group = groups.ServingGroup("lab_pair", ("rank0", "rank1"), "mp", 29501)
    tp, pp = ("2", "1") if args.split == "tp" else ("1", "2")
    planned = ["--tensor-parallel-size", tp, "--pipeline-parallel-size", pp, "--max-model-len", "512",
               "--max-num-seqs", "4", "--dtype", "float32",
               "--kv-cache-memory-bytes", "33554432"]  # fmt: skip
    planned += (["--enforce-eager"] if args.compile == "eager"
                else ["--compilation-config", '{"mode": 2, "backend": "eager"}'])  # fmt: skip
    facts = {
        h: {"interfaces": ["eth0"], "eth0": {"device": "eth0", "ipv4": {"address": a}}}
        for h, a in addrs.items()
    }
    started = time.monotonic()
    for (host, addr), name in zip(addrs.items(), NAMES, strict=True):
        command = deploy.vllm_command("/models/tiny", "tiny", addr, 8000, planned)
        launch = groups.member_launch(command, group, host, addrs["rank0"], addr, args.version)
        env = groups.member_env(group, host, addr, facts[host])
        print(f"{host}: vllm serve {' '.join(launch['command'])}  env {env}", flush=True)
        extra = dict(item.split("=", 1) for item in args.env)
        envs = [x for k, v in {**env, "VLLM_API_KEY": KEY, "VLLM_CPU_KVCACHE_SPACE": "1", **extra}.items()
                for x in ("-e", f"{k}={v}")]  # fmt: skip
        sh("docker", "run", "-d", "--name", name, "--network", NET, "--ip", addr, "--shm-size", "1g",
           *envs, args.image, *launch["command"])  # fmt: skip
    base = f"http://{addrs['rank0']}:8000"
    # the host reaches the containers on the bridge network directly
    while time.monotonic() - started < args.ready_timeout:
        if get(f"{base}/health") == 200:
            break
        states = [sh("docker", "inspect", "-f", "{{.State.Status}}", n, check=False) for n in NAMES]
        if "exited" in states:
            break
        time.sleep(5)
    ready_s = time.monotonic() - started
    status = get(f"{base}/health")
    print(f"rank 0 health after {ready_s:.0f} s: {status}", flush=True)
    ok = False
    if status == 200:
        code, text = post(f"{base}/v1/completions", {"model": "tiny", "prompt": "hello", "max_tokens": 8})
        print(f"completion through rank 0: HTTP {code} {text[:300]}", flush=True)
        ok = code == 200
        for name in NAMES:  # what each member said while serving, before the follower is killed
            done = subprocess.run(["docker", "logs", name], capture_output=True, text=True, check=False)
            Path(f"{args.logs}/{name}.log").write_text(done.stdout + done.stderr)
        sh("docker", "kill", NAMES[1])
        killed = time.monotonic()
        time.sleep(10)
        code, text = post(f"{base}/v1/completions", {"model": "tiny", "prompt": "hello", "max_tokens": 8}, 30)
        print(f"follower killed: rank 0 health {get(f'{base}/health')}, completion HTTP {code} {text[:200]}")
        # rank 0 notices at its next step: the step times out (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS)
        while time.monotonic() - killed < 400 and get(f"{base}/health") == 200:
            time.sleep(3)
        print(f"rank 0 health {get(f'{base}/health')} {time.monotonic() - killed:.0f} s after the kill")
    for name in NAMES:
        state = sh("docker", "inspect", "-f", "{{.State.Status}} exit={{.State.ExitCode}}", name, check=False)
        logs = subprocess.run(["docker", "logs", "--tail", "25", name], capture_output=True, text=True).stderr
        print(f"--- {name}: {state}\n{logs}", flush=True)
    cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
