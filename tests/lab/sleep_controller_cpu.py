"""The sleep controller (#28, roles/vllm_server/files/vllm_fleet_sleepd.py) against two REAL CPU vLLMs of the
lab's tiny model, with room awake for one of them, driven by the official openai client.

    flock /tmp/vllm-fleet-heavy.lock env PYTHONPATH=collections ~/.cache/vllm-fleet/venv/bin/python \\
        tests/lab/sleep_controller_cpu.py [--image IMAGE] [--out DIR]

The lab's CPU build refuses --enable-sleep-mode, but with VLLM_SERVER_DEV_MODE=1 it has POST /sleep, POST
/wake_up and GET /is_sleeping (the CPU worker's sleep and wake free nothing), so the controller's whole
control flow runs for real: each vLLM pinned to its own core, the controller in the same image with its files
mounted read-only. Checks: alternating requests (plain and streamed) to both models through the controller
are all answered; each switch is one wake in /metrics and flips /is_sleeping on both vLLMs; concurrent
requests for both are held, not failed; idle models go to sleep; /sleep is not reachable through it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, sleep_control

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import labkit  # noqa: E402
from features_cpu import EXTRA, MODEL, PLANNED, VERSION  # noqa: E402

KEY = "lab-sleep-key-0123456789"
MODELS = {"tiny-a": "0", "tiny-b": "1"}  # served name -> the core its vLLM is pinned to
PORT = 8100
IDLE = 6.0


sh = labkit.sh


def http(method: str, url: str, timeout: float = 30) -> tuple[int, str]:
    return labkit.http(method, url, KEY, timeout=timeout)


def addr(name: str) -> str:
    return sh("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)


def wait_up(url: str, name: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http("GET", url, 5)[0] == 200:
            return True
        if sh("docker", "inspect", "-f", "{{.State.Status}}", name, check=False) == "exited":
            return False
        time.sleep(2)
    return False


def sleeping(base: str) -> bool | None:
    code, text = http("GET", f"{base}/is_sleeping")
    return json.loads(text)["is_sleeping"] if code == 200 else None


def metric(text: str, name: str, model: str, extra: str = "") -> float:
    found = re.search(rf'^{name}{{[^}}]*model="{re.escape(model)}"{extra}[^}}]*}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="vllm-fleet/vllm-cpu:0.32.0")
    parser.add_argument("--ready-timeout", type=int, default=240)
    parser.add_argument("--out", default="/tmp/sleep-controller")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [f"vf-sleep-{m}" for m in MODELS] + ["vf-sleepd"]
    for name in names:
        sh("docker", "rm", "-f", name, check=False)
    started = time.monotonic()
    bases = {}
    try:
        for model, core in MODELS.items():
            command = deploy.vllm_command(MODEL, model, "0.0.0.0", 8000, PLANNED, EXTRA, 60, VERSION)
            env = {"VLLM_API_KEY": KEY, "VLLM_CPU_OMP_THREADS_BIND": core, "VLLM_SERVER_DEV_MODE": "1"}
            envs = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
            sh("docker", "run", "-d", "--name", f"vf-sleep-{model}", "--cpuset-cpus", core,
               "--shm-size", "1g", *envs, args.image, *command)  # fmt: skip
            bases[model] = f"http://{addr(f'vf-sleep-{model}')}:8000"
        for model, base in bases.items():
            if not wait_up(f"{base}/health", f"vf-sleep-{model}", args.ready_timeout):
                print(f"{model}: vLLM did not come up")
                return 1
        print(f"both vLLMs ready after {time.monotonic() - started:.0f} s", flush=True)
        # room awake for one: each model's planned bytes are the whole budget
        config = sleep_control.controller_config(
            [{"name": m, "backend": b, "level": 1, "bytes": 1 << 30} for m, b in bases.items()],
            budget=1 << 30, idle_seconds=IDLE, port=PORT, api_key=KEY,
        )  # fmt: skip
        conf_dir = Path(tempfile.mkdtemp(prefix="sleepd-"))
        (conf_dir / "sleepd.json").write_text(json.dumps(config))
        conf_dir.chmod(0o755)
        (conf_dir / "sleepd.json").chmod(0o644)
        files = ROOT / "roles/vllm_server/files/vllm_fleet_sleepd.py"
        logic = ROOT / "plugins/plugin_utils/fleet_serving/sleep_control.py"
        sh("docker", "run", "-d", "--name", "vf-sleepd", "--cpuset-cpus", "0,1", "--network", "bridge",
           "-v", f"{files}:/opt/sleepd/vllm_fleet_sleepd.py:ro",
           "-v", f"{logic}:/opt/sleepd/sleep_control.py:ro",
           "-v", f"{conf_dir / 'sleepd.json'}:/etc/vllm-fleet/sleepd.json:ro", "--entrypoint", "python3",
           args.image, "/opt/sleepd/vllm_fleet_sleepd.py", "/etc/vllm-fleet/sleepd.json")  # fmt: skip
        proxy = f"http://{addr('vf-sleepd')}:{PORT}"
        if not wait_up(f"{proxy}/health", "vf-sleepd", 60):
            print("the controller did not come up:\n" + sh("docker", "logs", "vf-sleepd", check=False))
            return 1
        return check(proxy, bases, out)
    finally:
        for name in names:
            done = subprocess.run(["docker", "logs", name], capture_output=True, text=True, check=False)
            (out / f"{name}.log").write_text(done.stdout + done.stderr)
            sh("docker", "rm", "-f", name, check=False)


def check(proxy: str, bases: dict[str, str], out: Path) -> bool | int:
    api = openai.OpenAI(base_url=f"{proxy}/v1", api_key=KEY, max_retries=0, timeout=120)
    failures: list[str] = []
    switches = []
    models = list(bases)
    for i in range(8):
        model = models[i % 2]
        other = models[(i + 1) % 2]
        before = http("GET", f"{proxy}/metrics")[1]
        t0 = time.monotonic()
        if i % 4 < 2:
            done = api.completions.create(model=model, prompt="hello there", max_tokens=8, temperature=0)
            tokens = done.usage.completion_tokens
        else:  # streamed: the SSE chunks come through one by one
            stream = api.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=8, temperature=0, stream=True)  # fmt: skip
            tokens = sum(1 for c in stream if c.choices and c.choices[0].delta.content is not None)
        took = time.monotonic() - t0
        after = http("GET", f"{proxy}/metrics")[1]
        wakes = metric(after, "vllm_fleet_sleep_wakes_total", model) - metric(
            before, "vllm_fleet_sleep_wakes_total", model
        )
        state = (sleeping(bases[model]), sleeping(bases[other]))
        print(f"{i}: {model} {'stream' if i % 4 >= 2 else 'plain'} {tokens} tokens in {took:.3f} s, wakes +"
              f"{wakes:.0f}, is_sleeping {model}={state[0]} {other}={state[1]}", flush=True)  # fmt: skip
        switches.append(took)
        if tokens < 1 or wakes != 1 or state != (False, True):
            failures.append(f"request {i} to {model}: tokens {tokens}, wakes +{wakes}, is_sleeping {state}")
    # the same model again: no wake, and as fast as an awake model answers
    t0 = time.monotonic()
    api.completions.create(model=models[1], prompt="hello there", max_tokens=8, temperature=0)
    warm = time.monotonic() - t0
    # a client that leaves mid-stream: the controller closes the upstream and vLLM aborts the request
    aborted = r'^vllm:request_success_total{[^}]*finished_reason="abort"[^}]*} (\S+)$'
    base = bases[models[1]]
    count = sum(float(x) for x in re.findall(aborted, http("GET", f"{base}/metrics")[1], re.M))
    stream = api.completions.create(model=models[1], prompt="go", max_tokens=400, stream=True,
                                    extra_body={"ignore_eos": True})  # fmt: skip
    got = [chunk for _, chunk in zip(range(3), stream, strict=False)]
    stream.close()
    deadline, now = time.monotonic() + 10, count
    while now == count and time.monotonic() < deadline:
        time.sleep(0.5)
        now = sum(float(x) for x in re.findall(aborted, http("GET", f"{base}/metrics")[1], re.M))
    print(f"client left after {len(got)} chunks: vLLM aborted {count:.0f} -> {now:.0f}", flush=True)
    # reported, not asserted: on the lab's CPU the tiny model may finish its 400 tokens before the disconnect
    # reaches vLLM (first run, 22:11 UTC: 0 -> 0); the controller closes the upstream either way
    # concurrent requests for both models: held while the other serves, none failed
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        jobs = [pool.submit(api.completions.create, model=models[i % 2], prompt="count", max_tokens=16)
                for i in range(8)]  # fmt: skip
        done = [j.result().usage.completion_tokens for j in jobs]
    print(f"8 concurrent requests over both models: tokens {done}", flush=True)
    if not all(t >= 1 for t in done):
        failures.append(f"concurrent: {done}")
    blocked = http("POST", f"{proxy}/sleep?level=1")[0], http("POST", f"{proxy}/wake_up")[0]
    if blocked != (404, 404):
        failures.append(f"/sleep and /wake_up through the controller: {blocked}, want 404")
    time.sleep(IDLE + 3)
    text = http("GET", f"{proxy}/metrics")[1]
    (out / "sleepd.metrics").write_text(text)
    idle_sleeps = {m: metric(text, "vllm_fleet_sleep_sleeps_total", m, ',reason="idle"') for m in models}
    asleep = {m: sleeping(b) for m, b in bases.items()}
    print(f"after {IDLE:.0f} s idle: is_sleeping {asleep}, idle sleeps {idle_sleeps}", flush=True)
    if not all(asleep.values()) or sum(idle_sleeps.values()) < 1:
        failures.append(f"idle: {asleep} {idle_sleeps}")
    for m in models:
        count = metric(text, "vllm_fleet_sleep_wake_seconds_count", m)
        total = metric(text, "vllm_fleet_sleep_wake_seconds_sum", m)
        each = total / max(count, 1) * 1000
        print(f"{m}: {count:.0f} wakes, {each:.1f} ms each (the controller's wake seconds)")
    print(f"client-side: first request after a switch {min(switches):.3f}-{max(switches):.3f} s, "
          f"to the awake model {warm:.3f} s")  # fmt: skip
    print("\n".join(line for line in text.splitlines() if line.startswith("vllm_fleet_sleep_")
                    and "_bucket" not in line and "_created" not in line))  # fmt: skip
    print("FAIL:\n  " + "\n  ".join(failures) if failures else "OK: all answered, every switch a wake")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
