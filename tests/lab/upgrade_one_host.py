#!/usr/bin/env python3
"""One lab host upgraded under client load, with the lab's own settings: what a newcomer does after
`make lab`.

Four threads of the official openai client (streaming and not, through the gateway, each pausing --pause
seconds between its requests) run while
`playbooks/upgrade.yml` replaces one lab host's vLLMs with the same image under a second tag, then while
`playbooks/rollback.yml` returns it. Passes when both playbooks succeed and no request failed or was cut
short; prints the request counts and how long the canary's vLLM took to answer.

Usage (the lab up): python tests/lab/upgrade_one_host.py [--host lab-gpu1] [--tag IMAGE] [--pause 2]
  (IMAGE: the lab's vLLM image under a second tag, vllm-fleet/vllm-cpu:0.32.0-canary by default)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import openai
import yaml

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventories" / "lab"
GATEWAY = "http://127.0.0.1:8080/v1"


@dataclass
class Load:
    """Clients that ask tiny until stopped, each pausing between its requests; every answer is classified.

    The pause keeps requests in flight through drain, replace and gate without the lab's CPU vLLMs holding
    both of a small machine's cores, where Ansible itself then crawls (pause 0: a request always waiting).

    A request that gets no complete answer (a connection error, no HTTP status) is sent once more, as the
    openai client does by default (max_retries=2): a gateway reload closes keep-alive connections the client
    may be reusing at that instant, which HTTP lets a server do. Each resend is counted and printed with its
    time and cause; an error status, a second connection error or a stream cut after it began is a failure.
    """

    key: str
    threads: int = 4
    pause: float = 2.0
    counts: dict[str, int] = field(
        default_factory=lambda: {"ok": 0, "failed": 0, "truncated": 0, "resent": 0}
    )
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _note(self, outcome: str, exc: BaseException) -> None:
        cause = exc.__cause__ or exc.__context__
        said = f"{time.strftime('%H:%M:%S')} {outcome}: {type(exc).__name__}: {exc}"
        if cause is not None:
            said += f" ({type(cause).__name__}: {cause})"
        with self._lock:
            self.errors.append(said[:300])
            if outcome == "resent":
                self.counts["resent"] += 1

    def _one(self, client: openai.OpenAI, stream: bool) -> str:
        messages = [{"role": "user", "content": "Hello"}]
        for attempt in (1, 2):
            try:
                if not stream:
                    r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=16)
                    return "ok" if r.choices[0].finish_reason in ("stop", "length") else "truncated"
                answer = client.chat.completions.create(
                    model="tiny", messages=messages, max_tokens=16, stream=True
                )
                break
            except openai.APIConnectionError as exc:
                if attempt == 1 and not isinstance(exc, openai.APITimeoutError):
                    self._note("resent", exc)
                    continue
                self._note("failed", exc)
                return "failed"
            except openai.APIError as exc:
                self._note("failed", exc)
                return "failed"
        finish = None
        try:
            for chunk in answer:
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
        except openai.APIError as exc:  # the stream began and was cut
            self._note("truncated", exc)
            return "truncated"
        return "ok" if finish in ("stop", "length") else "truncated"

    def _run(self, index: int) -> None:
        client = openai.OpenAI(base_url=GATEWAY, api_key=self.key, max_retries=0, timeout=300)
        n = 0
        while not self._stop.is_set():
            outcome = self._one(client, stream=(index + n) % 2 == 0)
            n += 1
            with self._lock:
                self.counts[outcome] += 1
            self._stop.wait(self.pause)

    def __enter__(self) -> Load:
        self._workers = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(self.threads)
        ]
        for worker in self._workers:
            worker.start()
        return self

    def flowing(self, timeout: float = 120) -> None:
        """Wait until every thread has had an answer: the load runs before the host is touched."""
        deadline = time.monotonic() + timeout
        while self.answered() < self.threads and time.monotonic() < deadline:
            time.sleep(0.2)

    def answered(self) -> int:
        return self.counts["ok"] + self.counts["failed"] + self.counts["truncated"]

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=330)


def playbook(name: str, *args: str) -> tuple[int, float, str]:
    start = time.monotonic()
    done = subprocess.run(
        ["ansible-playbook", "-i", str(INVENTORY), f"playbooks/{name}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return done.returncode, time.monotonic() - start, done.stdout + done.stderr


def ready_seconds(host: str) -> dict[str, float]:
    """Each model's readiness time at its last start on host, from the deployment it recorded."""
    container = f"vllm-fleet-lab-{host.removeprefix('lab-')}"
    raw = subprocess.run(
        ["docker", "exec", container, "cat", "/etc/ansible/facts.d/vllm_fleet.fact"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    models = json.loads(raw).get("models", {})
    return {name: m["current"]["baseline"]["ready_seconds"] for name, m in models.items()}


def gateway_errors() -> str:
    """The end of the lab gateway's nginx error log: why it closed or refused a connection."""
    done = subprocess.run(
        ["docker", "exec", "vllm-fleet-lab-gateway", "tail", "-n", "12", "/var/log/nginx/error.log"],
        capture_output=True,
        text=True,
    )
    text = (done.stdout or done.stderr).strip()
    return "\n    " + text.replace("\n", "\n    ") if text else "(empty)"


def phase(name: str, key: str, pause: float, *args: str) -> tuple[bool, str]:
    with Load(key, pause=pause) as load:
        load.flowing()
        rc, seconds, output = playbook(name, *args)
        time.sleep(2)  # requests sent as the host came back are answered by it too
    counts = load.counts
    line = (
        f"{name}: rc {rc} in {seconds:.0f} s; requests {load.answered()} ({load.threads} threads, "
        f"{pause:g} s pause), ok {counts['ok']}, "
        f"failed {counts['failed']}, truncated {counts['truncated']}; "
        f"resent once after a connection error {counts['resent']}"
    )
    good = rc == 0 and counts["failed"] == 0 and counts["truncated"] == 0 and counts["ok"] > 0
    log = Path(tempfile.gettempdir()) / f"vllm-fleet-lab-{name}.log"
    log.write_text(output)
    # the rollout's own report: each host's gate verdict, the peers it was compared with, the samples
    gate = re.search(r"report \| Show each host's gate.*?\n(.*?)\n(?:TASK|PLAY) ", output, flags=re.S)
    if gate:
        line += "\n  gate: " + " ".join(gate.group(1).split())[:1500]
    if load.errors:
        line += "\n  client: " + "\n  client: ".join(load.errors[:8])
    if not good:
        said = re.findall(r'^\s*"?msg"?: (.*)$|^((?:fatal|failed):.*)$', output, flags=re.M)[-6:]
        line += "\n  " + "\n  ".join([m or f for m, f in said]) + f"\n  whole output: {log}"
        line += "\n  gateway error log: " + gateway_errors()
    return good, line


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="lab-gpu1")
    parser.add_argument("--tag", default="vllm-fleet/vllm-cpu:0.32.0-canary")
    parser.add_argument(
        "--pause", type=float, default=2.0, help="seconds each client thread waits between requests"
    )
    args = parser.parse_args()
    gateway = yaml.safe_load((INVENTORY / "group_vars/gateways/gateway.yml").read_text())
    key = gateway["gateway_client_keys"][0]["key"]
    image = yaml.safe_load((INVENTORY / "group_vars/gpu_nodes/vllm_server.yml").read_text())[
        "vllm_server_image"
    ]
    subprocess.run(["docker", "tag", image, args.tag], check=True)
    ok_up, up = phase(
        "upgrade.yml", key, args.pause, "--limit", args.host, "-e", f"vllm_server_image={args.tag}"
    )
    print(up, flush=True)
    if ok_up:
        print(f"canary ready (s): {ready_seconds(args.host)}")
    ok_back, back = phase("rollback.yml", key, args.pause, "--limit", args.host)
    print(back)
    print(f"{'PASS' if ok_up and ok_back else 'FAIL'}: one lab host upgraded and rolled back under load")
    return 0 if ok_up and ok_back else 1


if __name__ == "__main__":
    sys.exit(main())
