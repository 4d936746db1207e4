#!/usr/bin/env python3
"""Rolling upgrades under load: does any client request fail while the fleet changes version?

Brings up a gateway and three GPU nodes (systemd containers, the real CPU vLLM beside each node
in its network namespace, real nginx), deploys version A host by host, then, while streaming
clients (default 4) keep sending completions through the gateway:

  upgrade      playbooks/upgrade.yml moves the three hosts to version B (a second image tag)
  never-ready  a canary whose image never becomes healthy: rolled back, the others keep B
  bad-args     a canary with an argument vLLM rejects: rolled back, the others keep B
  wont-stop    a canary that hangs in start-up in the kernel (D state, on a FUSE mount that never
               answers) so that Docker cannot stop it on the restore ("tried to kill container, but
               did not receive an exit event"); the mount answers a while after the first SIGKILL,
               the restore waits for the exit, removes it and starts the recorded version
  rollback     playbooks/rollback.yml returns every host to version A
  host-lost    (not in the defaults: --phases host-lost) the canary stops answering once the gateway
               has it drained (its node container paused: every Ansible connection to it fails); the
               rollout stops with the host left drained and named, no other host touched; then the
               bench puts it back with the undrain command the message gives and checks it serves
  loaded       (not in the defaults: --phases loaded) an upgrade to an identical image (the other tag of
               the same image) while a CPU burner runs on every core of the machine, the gate made
               sensitive (latency floor 0.05 s): it must pass against its live peers (same load, same
               window) and the rollout complete; the gate report (verdict, peers, samples) is printed
  slower       (not in the defaults: --phases slower) a canary that is really slower: the lab image with
               an entrypoint that pins vLLM to core 0 and, once vLLM answers /health, starts 8 CPU burners
               on that core (vLLM keeps about a ninth of it); same low floor: the gate must fail it with
               confidence, the canary goes back to what it ran, the other hosts untouched

and prints, per phase: requests sent, failed, truncated streams (no [DONE]), the playbook's
duration and the checks of what each host runs. Target: 0 failed, 0 truncated in every phase.

--groups serves the model as two serving groups of two nodes each (four nodes, one replica per
group, pipeline parallel over Gloo between the CPU vLLMs of a group's two nodes; the gateway reaches
a group through its rank 0). Its phases: upgrade (both groups to version B, one group at a time),
follower-fails (a canary group whose follower gets an image that never starts: the whole group goes
back to the version it ran, the other group is untouched), rollback.
The load is the official `openai` client (--client openai, the default: half the threads stream,
half do not, no client retries) or raw HTTP streams (--client http).

Bounded: each phase's load stops with its playbook (and after 90 minutes); clients only talk to
loopback or private addresses (the benchmark's own network). Everything it creates is named
vf-up-bench-* and removed at the end (--keep leaves it up; `down` removes it).

Usage (from the repository root, as root, on the machine's Docker engine):
  benchmarks/upgrade_under_load.py [run] [--clients 4] [--max-tokens 128] [--phases upgrade,never-ready,...]
      [--client openai|http] [--ready-timeout 90] [--hold-after-kill 40]
  benchmarks/upgrade_under_load.py --groups [--phases upgrade,follower-fails,rollback]
  benchmarks/upgrade_under_load.py --phases host-lost
  benchmarks/upgrade_under_load.py --phases loaded,slower [--workdir /tmp/ls/run]
      the gate under a loaded machine: an identical image passes it, a slower one fails it
  benchmarks/upgrade_under_load.py up | down
  benchmarks/upgrade_under_load.py remove-stuck [--hold-after-kill 30]
      vllm_server's remove.yml alone against a container Docker cannot stop (a minute, no fleet)
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from stuck_mount import StuckMount, wait_for

REPO = Path(__file__).resolve().parent.parent
PREFIX = "vf-up-bench"
NETWORK = PREFIX
MODELS_DIR = f"/srv/{PREFIX}/models"
NODES = [f"{PREFIX}-gpu{i}" for i in (1, 2, 3)]
# --groups: two serving groups of two nodes, rank 0 first (the group's order is its hosts' order)
GROUPS = {
    "bench_pair_a": [f"{PREFIX}-gpu1", f"{PREFIX}-gpu2"],
    "bench_pair_b": [f"{PREFIX}-gpu3", f"{PREFIX}-gpu4"],
}
GROUP_NODES = [node for members in GROUPS.values() for node in members]
GATEWAY = f"{PREFIX}-gateway"
LABEL = "io.vllm-fleet.test=upgrade-bench"
REVISION = "5f1c0de2a1b7e6d4c3b2a1908f7e6d5c4b3a2910"
BACKEND_KEY = "vf-up-bench-backend-0123456789abcdef"  # test-only secrets
CLIENT_KEY = "vf-up-bench-client-0123456789abcdef"
GATEWAY_PORT = 8080
UPSTREAMS = "/etc/nginx/vllm-fleet/upstreams.conf"  # the gateway role's rendered upstreams
DRAINED_DIR = "/etc/nginx/vllm-fleet/drained"  # its drain marks
STUCK_NAME = f"{PREFIX}-stuck"
DEFAULT_PHASES = "upgrade,never-ready,bad-args,wont-stop,rollback"
STUCK_ROOT = f"/srv/{PREFIX}-stuck"
# loaded, slower: a gate that judges small differences (the inventory's 3 s floor hides them)
SENSITIVE_GATE = {"fleet_rollout_gate_latency_floor": 0.05}
SLOW_BURNERS = 8  # burners beside the slower canary's vLLM on its core
# the slower canary: vLLM pinned to core 0; once it answers /health (its start is not slowed), burners
# on core 0 leave it a fraction of that core. Arguments: vLLM serve's (the deployment's command).
SLOW_SCRIPT = f"""
host=127.0.0.1 port=8000 prev=
for a in "$@"; do
  [ "$prev" = --host ] && [ "$a" != 0.0.0.0 ] && host=$a
  [ "$prev" = --port ] && port=$a
  prev=$a
done
(
  health="import urllib.request as u; u.urlopen('http://$host:$port/health', timeout=5)"
  until python3 -c "$health" 2>/dev/null; do sleep 2; done
  for i in $(seq {SLOW_BURNERS}); do taskset -c 0 sh -c 'while :; do :; done' & done
) &
exec taskset -c 0 vllm serve "$@"
"""


# ---------------------------------------------------------------------------------------------
# Load: streaming completions through the gateway, each checked for its final [DONE]


def classify_stream(status: int | None, lines: list[bytes], error: str | None = None) -> str:
    """``ok``: HTTP 200, at least one chunk, ends with ``data: [DONE]``; ``truncated``: HTTP 200
    but the stream stopped (or carried an error event) before ``[DONE]``; ``failed``: no 200."""
    if status != 200:
        return "failed"
    chunks = 0
    for raw in lines:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return "ok" if chunks > 0 and error is None else "truncated"
        try:
            event = json.loads(data)
        except ValueError:
            return "truncated"
        if isinstance(event, dict) and event.get("error"):
            return "truncated"
        chunks += 1
    return "truncated"


@dataclass
class LoadStats:
    sent: int = 0
    outcomes: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return self.outcomes["failed"]

    @property
    def truncated(self) -> int:
        return self.outcomes["truncated"]

    def summary(self) -> str:
        ttft = sorted(self.ttft)
        p50 = ttft[len(ttft) // 2] if ttft else float("nan")
        p99 = ttft[min(len(ttft) - 1, int(len(ttft) * 0.99))] if ttft else float("nan")
        return (
            f"sent {self.sent}, ok {self.outcomes['ok']}, failed {self.failed}, truncated {self.truncated} "
            f"in {self.seconds:.0f} s; TTFT p50 {p50 * 1000:.0f} ms p99 {p99 * 1000:.0f} ms"
            + (f"; statuses {dict(self.statuses)}" if set(self.statuses) - {200} else "")
        )


def _private_url(url: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(url)
    try:
        address = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        raise SystemExit(f"load: {url}: give an IP address (loopback or private)") from None
    if not (address.is_loopback or address.is_private):
        raise SystemExit(f"load: {url} is not a loopback or private address; refusing to send load there")
    return parts


class StreamLoad:
    """``clients`` threads sending streaming completions until stopped, each waiting ``think``
    seconds between two requests, at most ``max_requests`` in all and ``max_seconds`` long.
    A fresh connection per request."""

    def __init__(
        self,
        url: str,
        key: str,
        model: str = "tiny",
        clients: int = 4,
        max_tokens: int = 128,
        max_seconds: float = 1800,
        max_requests: int = 200_000,
        request_timeout: float = 120,
        think: float = 0.0,
    ) -> None:
        self.parts = _private_url(url)
        self.key = key
        self.body = json.dumps(
            {"model": model, "prompt": "Hello", "max_tokens": max_tokens, "stream": True, "ignore_eos": True}
        ).encode()
        self.clients = clients
        self.max_seconds = max_seconds
        self.max_requests = max_requests
        self.request_timeout = request_timeout
        self.think = think
        self.stats = LoadStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = 0.0

    def one(self) -> tuple[str, int | None, str | None, float | None]:
        start = time.monotonic()
        conn = http.client.HTTPConnection(
            self.parts.hostname, self.parts.port or 80, timeout=self.request_timeout
        )
        status: int | None = None
        lines: list[bytes] = []
        error: str | None = None
        first: float | None = None
        try:
            conn.request(
                "POST",
                "/v1/completions",
                body=self.body,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
            )
            resp = conn.getresponse()
            status = resp.status
            if status != 200:
                error = resp.read(300).decode("utf-8", "replace")
            else:
                for raw in resp:
                    if first is None and raw.strip():
                        first = time.monotonic() - start
                    lines.append(raw)
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
        return classify_stream(status, lines, error if status == 200 else None), status, error, first

    def _client(self) -> None:
        while not self._stop.is_set() and time.monotonic() - self._started < self.max_seconds:
            with self._lock:
                if self.stats.sent >= self.max_requests:
                    return
                self.stats.sent += 1
            outcome, status, error, first = self.one()
            with self._lock:
                self.stats.outcomes[outcome] += 1
                self.stats.statuses[status] += 1
                if first is not None and outcome == "ok":
                    self.stats.ttft.append(first)
                if outcome != "ok" and len(self.stats.errors) < 10:
                    self.stats.errors.append(f"{time.strftime('%H:%M:%S')} {outcome} {status}: {error}")
            if self.think:
                self._stop.wait(self.think)

    def start(self) -> StreamLoad:
        self._started = time.monotonic()
        self._threads = [threading.Thread(target=self._client, daemon=True) for _ in range(self.clients)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> LoadStats:
        self._stop.set()
        for thread in self._threads:
            thread.join(self.request_timeout + 5)
        self.stats.seconds = time.monotonic() - self._started
        return self.stats


class OpenAILoad(StreamLoad):
    """The official ``openai`` client as a new user runs it: ``clients`` threads, the even ones
    streaming, the odd ones not, no client retries (a retry would hide a failed request).
    A streamed completion is ``ok`` when it ends with a chunk carrying its finish_reason (the
    client reads up to [DONE]); a plain one when it has its text and finish_reason."""

    def __init__(self, url: str, key: str, **kwargs) -> None:
        super().__init__(url, key, **kwargs)
        import openai  # the bench's own dependency (bin/bootstrap installs it)

        self.openai = openai
        self.client = openai.OpenAI(
            base_url=f"{url.rstrip('/')}/v1", api_key=key, max_retries=0, timeout=self.request_timeout
        )
        self.kinds: Counter = Counter()
        self._n = 0
        self._kind: dict[int, bool] = {}
        self.max_tokens = json.loads(self.body)["max_tokens"]

    def one(self, stream: bool | None = None) -> tuple[str, int | None, str | None, float | None]:
        if stream is None:
            with self._lock:  # each thread keeps its kind: the first to ask streams, the next does not, ...
                me = threading.get_ident()
                if me not in self._kind:
                    self._kind[me], self._n = self._n % 2 == 0, self._n + 1
                stream = self._kind[me]
        start = time.monotonic()
        first = None
        args = {"model": "tiny", "prompt": "Hello", "max_tokens": self.max_tokens,
                "extra_body": {"ignore_eos": True}}  # fmt: skip
        try:
            if stream:
                finish, chunks = None, 0
                for chunk in self.client.completions.create(stream=True, **args):
                    if first is None:
                        first = time.monotonic() - start
                    chunks += 1
                    if chunk.choices and chunk.choices[0].finish_reason:
                        finish = chunk.choices[0].finish_reason
                outcome = "ok" if chunks and finish else "truncated"
                return outcome, 200, None if outcome == "ok" else f"stream ended after {chunks} chunks", first
            reply = self.client.completions.create(**args)
            first = time.monotonic() - start
            ok = bool(reply.choices and reply.choices[0].text and reply.choices[0].finish_reason)
            return (
                ("ok" if ok else "truncated"),
                200,
                None if ok else f"incomplete reply {reply!r:.200}",
                first,
            )
        except self.openai.APIStatusError as exc:
            return "failed", exc.status_code, f"{type(exc).__name__}: {exc.message:.300}", None
        except self.openai.APIError as exc:
            # the connection broke: before the first chunk the request failed, after it was cut
            outcome = "truncated" if first is not None else "failed"
            return outcome, 200 if first is not None else None, f"{type(exc).__name__}: {exc}", None
        finally:
            with self._lock:
                self.kinds["stream" if stream else "plain"] += 1


# ---------------------------------------------------------------------------------------------
# The benchmark's fleet: systemd containers on the machine's Docker engine


def sh(*args: str, check: bool = True, capture: bool = True, timeout: float = 600) -> str:
    result = subprocess.run(args, capture_output=capture, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout if capture else ""


def bootstrap_env() -> dict[str, str]:
    """The project's tooling environment (bin/bootstrap --vllm prints `export K=V` lines)."""
    out = sh(str(REPO / "bin" / "bootstrap"), "--vllm", timeout=3600)
    env = dict(os.environ)
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    for key in ("MOLECULE_IMAGE", "VLLM_FLEET_VLLM_IMAGE"):
        if not env.get(key):
            raise SystemExit(f"bin/bootstrap --vllm did not export {key}")
    return env


def inventory(vllm_image: str, groups: bool = False) -> dict:
    gpu_vars = {
        "lab_gpu_profile": "h200x1",
        "vllm_fleet_api_key": BACKEND_KEY,
        "vllm_server_image": vllm_image,
        "vllm_server_vllm_version": "0.32.0",
        "vllm_server_image_source": "local",
        "vllm_server_network_mode": "container:{{ inventory_hostname }}",
        "vllm_server_container_prefix": "{{ inventory_hostname }}-vllm-",
        "vllm_server_container_labels": {"io.vllm-fleet.test": "upgrade-bench"},
        "vllm_server_gpu_requests": False,
        "vllm_server_ready_timeout_base": 900,
        # vLLM must keep idle connections open longer than the gateway's upstream keepalive_timeout (60 s):
        # with vLLM's default of 5 s, nginx now and then reuses a connection vLLM is closing, and the
        # request fails with 502 (nginx does not resend a POST) even on hosts no rollout touches
        # the CPU build pins its compute threads to core 0 by default: every node's vLLM would share one
        # core of the machine; unpinned, one thread each, they share all of them
        "vllm_server_env": {
            "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "75",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "OMP_NUM_THREADS": "1",
        },
        "vllm_server_models": [
            {
                "name": "tiny",
                "path": f"{MODELS_DIR}/lab/tiny/main",
                "revision": "main",
                "port": 8000,
                "overrides": {
                    "max_model_len": 512,
                    "dtype": "float32",
                    "enforce_eager": True,
                    "max_num_seqs": 16,
                    "kv_cache_memory_bytes": "64M",
                },
            }
        ],
        # a CPU build on a shared 2-core machine: latency is noisy, startup is slow
        "fleet_rollout_gate_latency_floor": 3.0,
        "fleet_rollout_gate_timeout": 900,
    }
    nodes = GROUP_NODES if groups else NODES
    children: dict = {"bench_h200": {"hosts": {n: {} for n in nodes}}}
    if groups:
        # the lab's pipeline parallel CPU start (molecule/serving-group): torch.compile traced on the
        # eager backend; a group of two serves one replica, each member one pipeline stage
        (model,) = gpu_vars["vllm_server_models"]
        model["overrides"] = {**model["overrides"], "enforce_eager": False, "max_num_seqs": 4,
                              "kv_cache_memory_bytes": "32M"}  # fmt: skip
        model["extra_args"] = ["--compilation-config", '{"mode": 2, "backend": "eager"}']
        gpu_vars["vllm_fleet_serving_groups"] = list(GROUPS)
        gpu_vars["vllm_server_env"] = {
            **gpu_vars["vllm_server_env"],
            "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "60",
        }
        children.update({name: {"hosts": {n: {} for n in members}} for name, members in GROUPS.items()})
    return {
        "all": {
            "vars": {
                "ansible_connection": "community.docker.docker",
                "ansible_python_interpreter": "/usr/bin/python3",
            },
            "children": {
                "gateways": {
                    "hosts": {GATEWAY: {}},
                    "vars": {
                        "vllm_fleet_api_key": BACKEND_KEY,
                        "gateway_client_keys": [{"name": "bench", "key": CLIENT_KEY}],
                        "gateway_rate_limit_tiers": {"default": {"rate": "200r/s", "burst": 400}},
                        "gateway_http_port": GATEWAY_PORT,
                    },
                },
                "gpu_nodes": {"children": children, "vars": gpu_vars},
            },
        }
    }


class Bench:
    def __init__(self, env: dict[str, str], workdir: Path, groups: bool = False) -> None:
        self.groups = groups
        self.nodes = GROUP_NODES if groups else NODES
        self.env = {
            **env,
            "ANSIBLE_CACHE_PLUGIN": "memory",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }
        self.vllm_image = env["VLLM_FLEET_VLLM_IMAGE"]
        self.base_image = env["MOLECULE_IMAGE"]
        self.workdir = workdir
        self.inventory = workdir / "hosts.yml"
        self.inventory.write_text(json.dumps(inventory(self.vllm_image, groups), indent=1))
        self.image_b = f"{PREFIX}/vllm-cpu:b"
        self.image_never = f"{PREFIX}/vllm-cpu:never-ready"
        self.image_stuck = f"{PREFIX}/vllm-cpu:wont-stop"
        self.image_slow = f"{PREFIX}/vllm-cpu:slower"
        # where the stuck FUSE mount goes: inside the model's revision folder, which the canary's
        # container binds (the other containers bound it before the mount exists and never see it)
        self.stuck_path = f"{MODELS_DIR}/lab/tiny/{REVISION}/.stuck"
        self.load_class: type[StreamLoad] = OpenAILoad
        self.hold_after_kill = 40.0
        self.logs: dict[str, str] = {}

    # -- fleet
    def up(self) -> None:
        if sh("docker", "network", "ls", "-q", "--filter", f"name=^{NETWORK}$").strip() == "":
            sh("docker", "network", "create", "--label", LABEL, NETWORK)
        os.makedirs(MODELS_DIR, exist_ok=True)
        for name in [GATEWAY, *self.nodes]:
            if sh("docker", "ps", "-q", "--filter", f"name=^{name}$").strip():
                continue
            sh("docker", "rm", "-f", name, check=False)
            extra = (
                ["-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{MODELS_DIR}:{MODELS_DIR}"]
                if name != GATEWAY
                else []
            )
            sh(
                "docker", "run", "-d", "--name", name, "--hostname", name.rsplit("-", 1)[-1],
                "--label", LABEL, "--network", NETWORK, "--cap-add", "SYS_ADMIN",
                "--tmpfs", "/run", "--tmpfs", "/run/lock",
                "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "-e", "container=docker", *extra,
                self.base_image, "/lib/systemd/systemd",
            )  # fmt: skip
        # the tiny model in the model_weights layout: an immutable revision folder and refs/main
        sh(
            "docker", "run", "--rm", "--label", LABEL, "--entrypoint", "/bin/sh", "-v", f"{MODELS_DIR}:/out",
            self.vllm_image, "-c",
            f"rm -rf /out/lab && mkdir -p /out/lab/tiny/{REVISION} /out/lab/tiny/refs "
            f"&& cp -a /models/tiny/. /out/lab/tiny/{REVISION}/ "
            f"&& printf %s {REVISION} > /out/lab/tiny/refs/main",
        )  # fmt: skip
        # version B: the same image under a second tag; an image that never becomes ready
        sh("docker", "tag", self.vllm_image, self.image_b)
        # a start-up that hangs in the kernel: PID 1 reads the stuck mount under the model folder
        stuck = 'for a in "$@"; do [ -d "$a/.stuck" ] && exec cat "$a/.stuck/stuck"; done; sleep infinity'
        for image, script in (
            (self.image_never, "sleep infinity"),
            (self.image_stuck, stuck),
            (self.image_slow, SLOW_SCRIPT),
        ):
            entrypoint = json.dumps(["/bin/sh", "-c", script, "--"])
            if sh("docker", "images", "-q", image).strip():
                continue
            cid = sh("docker", "create", "--label", LABEL, self.vllm_image).strip()
            try:
                sh("docker", "commit", "--change", f"ENTRYPOINT {entrypoint}", cid, image)
            finally:
                sh("docker", "rm", cid)
        self.playbook("prepare", "tests/lab/prepare.yml", check=True)
        # version A, one host (or serving group) at a time (vLLM's start is CPU heavy), then the gateway
        for unit in GROUPS if self.groups else NODES:
            self.playbook(f"serve {unit}", "playbooks/serve.yml", "--limit", unit, check=True)
        self.playbook("gateway", "playbooks/gateway.yml", check=True)
        self.wait_serving()

    def down(self) -> None:
        # a stuck mount left by an interrupted run would hang rm -rf: detach every mount below first
        for line in Path("/proc/mounts").read_text().splitlines():
            target = line.split()[1]
            if target.startswith(f"/srv/{PREFIX}/"):
                sh("umount", "-l", target, check=False)
        for node in self.nodes:  # a node paused by an interrupted host-lost phase
            sh("docker", "unpause", node, check=False)
        ids = sh("docker", "ps", "-aq", "--filter", f"label={LABEL}").split()
        ids += sh("docker", "ps", "-aq", "--filter", "label=io.vllm-fleet.test=upgrade-bench").split()
        if ids:
            sh("docker", "rm", "-f", *sorted(set(ids)), check=False)
        sh("docker", "network", "rm", NETWORK, check=False)
        for image in (self.image_b, self.image_never, self.image_stuck, self.image_slow):
            sh("docker", "rmi", image, check=False)
        sh("rm", "-rf", f"/srv/{PREFIX}", check=False)

    def gateway_url(self) -> str:
        attrs = json.loads(sh("docker", "inspect", GATEWAY))[0]
        return f"http://{attrs['NetworkSettings']['Networks'][NETWORK]['IPAddress']}:{GATEWAY_PORT}"

    def wait_serving(self, timeout: float = 600) -> None:
        load = StreamLoad(self.gateway_url(), CLIENT_KEY, clients=1, max_tokens=4)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if load.one()[0] == "ok":
                return
            time.sleep(3)
        raise RuntimeError(f"the gateway {self.gateway_url()} did not serve within {timeout} s")

    def playbook(self, name: str, playbook: str, *args: str, check: bool = False) -> tuple[int, float, str]:
        start = time.monotonic()
        result = subprocess.run(
            ["ansible-playbook", "-i", str(self.inventory), playbook, *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=5400,
        )
        seconds = time.monotonic() - start
        output = result.stdout + result.stderr
        self.logs[name] = output
        (self.workdir / f"{name.replace(' ', '_')}.log").write_text(output)
        if check and result.returncode != 0:
            raise RuntimeError(f"{name}: ansible-playbook {playbook} failed:\n{output[-4000:]}")
        return result.returncode, seconds, output

    # -- what runs
    def state(self) -> dict[str, dict]:
        out = {}
        for node in self.nodes:
            container = f"{node}-vllm-tiny"
            attrs = json.loads(sh("docker", "inspect", container, check=False) or "[{}]")[0]
            fact_text = sh("docker", "exec", node, "cat", "/etc/ansible/facts.d/vllm_fleet.fact", check=False)
            fact = json.loads(fact_text or "{}")
            current = ((fact.get("models") or {}).get("tiny") or {}).get("current") or {}
            out[node] = {
                "image": (attrs.get("Config") or {}).get("Image"),
                "started": (attrs.get("State") or {}).get("StartedAt"),
                "running": (attrs.get("State") or {}).get("Running"),
                "recorded_image": current.get("image"),
                "version": current.get("version"),
            }
        return out

    def phase(
        self, name: str, playbook: str, extra: dict | None, clients: int, max_tokens: int, think: float
    ) -> dict:
        before = self.state()
        self.wait_serving()
        load = self.load_class(
            self.gateway_url(), CLIENT_KEY, clients=clients, max_tokens=max_tokens, max_seconds=5400
        )
        stuck = (
            StuckCanary(self.stuck_path, f"{self.nodes[0]}-vllm-tiny", self.hold_after_kill)
            if name == "wont-stop"
            else None
        )
        lost = HostLost(self.nodes[0]) if name == "host-lost" else None
        burn = CpuBurn() if name == "loaded" else None
        machine = LoadAverage().start()
        if burn:
            burn.start()
        if stuck:
            stuck.start()
        if lost:
            lost.start()
        load.start()
        time.sleep(5)  # the load is flowing before the playbook starts
        args = ["-e", json.dumps(extra)] if extra else []
        try:
            rc, seconds, output = self.playbook(name, playbook, *args)
        finally:
            if stuck:
                stuck.stop()
            if lost:
                lost.stop()  # the host answers again: the bench can read it and clean up
            if burn:
                burn.stop()
            machine.stop()
        time.sleep(5)
        stats = load.stop()
        result = {"name": name, "rc": rc, "seconds": seconds, "load": stats, "before": before,
                  "after": self.state(), "output": output, "stuck": stuck, "lost": lost,
                  "kinds": dict(getattr(load, "kinds", {})), "loadavg": machine.samples,
                  "burners": burn.count if burn else 0}  # fmt: skip
        if lost:
            lost.drained_after = drained(lost.node)
            # back in service the way the failure message says
            rc_un, _, _ = self.playbook(f"{name} undrain", "playbooks/undrain.yml", "--limit", lost.node)
            lost.undrained = rc_un == 0 and not drained(lost.node)
            self.wait_serving()
        return result


def drained(node: str, mark: bool = True) -> bool:
    """The gateway's upstreams mark ``node``'s server lines down (the drain applied) and it has its mark."""
    lines = [
        line
        for line in sh("docker", "exec", GATEWAY, "cat", UPSTREAMS, check=False).splitlines()
        if line.rstrip().endswith(f"# host={node}")
    ]
    if not (lines and all(" down;" in line for line in lines)):
        return False
    return (
        not mark
        or subprocess.run(["docker", "exec", GATEWAY, "test", "-e", f"{DRAINED_DIR}/{node}"]).returncode == 0
    )


class CpuBurn:
    """A busy loop on every core of the machine (``os.cpu_count()`` processes) while a phase runs."""

    def __init__(self, count: int | None = None) -> None:
        self.count = count or os.cpu_count() or 1
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait(10)


class LoadAverage:
    """The machine's 1-minute load average every ``every`` seconds while a phase runs."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> LoadAverage:
        self._thread.start()
        return self

    def _watch(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def load_summary(samples: list[float]) -> str:
    """``load average 1.2 to 5.6 (median 3.4) on N cores``: the machine's load over a phase."""
    if not samples:
        return "load average not sampled"
    ordered = sorted(samples)
    return (
        f"load average {ordered[0]:.1f} to {ordered[-1]:.1f} (median {ordered[len(ordered) // 2]:.1f}) "
        f"on {os.cpu_count()} cores"
    )


def gate_lines(output: str) -> list[str]:
    """What the rollout printed of its gates, in order: each gate's figures (``gate | Show the gate
    figures``: the verdict, its reason and the samples) and the closing report (``report | Show each
    host's gate``: one line per host and model, as compact JSON). Each ``"<gate|report>: <msg>"``.
    Reads the default callback's results in the YAML format (ansible.cfg's callback_result_format)."""
    import yaml  # Ansible's own dependency

    tasks = ("gate | Show the gate figures", "report | Show each host's gate")
    out: list[str] = []
    task, body = None, None

    def flush() -> None:
        try:
            msg = (yaml.safe_load(textwrap.dedent("\n".join(body or []))) or {}).get("msg")
        except (yaml.YAMLError, AttributeError):
            msg = None
        if isinstance(msg, dict):
            out.extend(f"{task}: {key}: {json.dumps(value)}" for key, value in msg.items())
        elif msg is not None:
            out.append(f"{task}: {msg}")

    for line in [*output.splitlines(), ""]:
        if body is not None:
            if line.startswith("    "):
                body.append(line)
                continue
            flush()
            body = None
        if line.startswith("TASK ["):
            task = next((t.split(" | ")[0] for t in tasks if t in line), None)
        elif task and line.startswith("ok: [") and line.rstrip().endswith("=>"):
            body = []
    return out


class HostLost:
    """The host's network goes once it is drained: as soon as the gateway's upstreams mark it down,
    its node container is paused. ``docker pause`` is the simplest faithful stand-in for a lost
    network: every Ansible connection to the node (docker exec) fails as an SSH one would, while
    the vLLM container beside it keeps its network namespace, so requests already routed finish."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.paused_at: float | None = None
        self.drained_after = False
        self.undrained = False
        self.events: list[str] = []
        self._t0 = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def _watch(self) -> None:
        if (
            not wait_for(lambda: self._stop.is_set() or drained(self.node, False), 3600, 0.5)
            or self._stop.is_set()
        ):
            return
        sh("docker", "pause", self.node)
        self.paused_at = time.monotonic() - self._t0
        self.events.append(f"+{self.paused_at:.0f} s drained on the gateway: {self.node} paused")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        if self.paused_at is not None:
            sh("docker", "unpause", self.node, check=False)
            self.events.append(f"+{time.monotonic() - self._t0:.0f} s playbook ended: {self.node} unpaused")


class StuckCanary:
    """Watches the canary hang on the stuck mount: when it entered D state, when Docker sent it SIGKILL,
    whether it still ran after Docker's kill gave up (Docker waits 10 + 2 s for the exit event); answers
    the mount ``hold`` seconds after the first SIGKILL so that the process can exit."""

    def __init__(self, path: str, container: str, hold: float) -> None:
        self.mount = StuckMount(path)
        self.container, self.hold = container, hold
        self.events: list[str] = []
        self.d_state = False
        self.running_after_kill = False
        self._t0 = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _note(self, text: str) -> None:
        self.events.append(f"+{time.monotonic() - self._t0:.0f} s {text}")

    def start(self) -> None:
        self._t0 = time.monotonic()
        self.mount.mount()
        self._thread.start()

    def _watch(self) -> None:
        if not wait_for(lambda: self.mount.held or self._stop.is_set(), 3600):
            return
        if self._stop.is_set():
            return
        pid = self.mount.held[0][1]
        self._note(f"the canary's PID 1 ({pid}) waits on the stuck mount")
        if not wait_for(lambda: self.mount.killed() or self._stop.is_set(), 3600):
            return
        if self._stop.is_set():
            return
        time.sleep(1)  # the fatal signal turns the wait uninterruptible
        try:
            self.d_state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "D"
        except OSError:
            pass
        self._note(f"SIGKILL pending (Docker is stopping it), state {'D' if self.d_state else '?'}")
        self._stop.wait(15)
        state = sh("docker", "inspect", "-f", "{{.State.Running}}", self.container, check=False).strip()
        self.running_after_kill = state == "true"
        self._note(f"15 s after SIGKILL: running {state}")
        self._stop.wait(max(0.0, self.hold - 15))
        self.mount.release()
        self._note("the mount answers: the process takes its SIGKILL and exits")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.mount.unmount()


def check_phase(result: dict, image_a: str, image_b: str, canary: list[str] | None = None) -> list[str]:
    """What must hold after each phase; returns the problems. ``canary``: the hosts the bad phases
    try first and must return to what they ran (the first node, or the first serving group)."""
    name, before, after, output = result["name"], result["before"], result["after"], result["output"]
    problems = []
    stats: LoadStats = result["load"]
    if stats.failed or stats.truncated:
        problems.append(f"clients saw {stats.failed} failed and {stats.truncated} truncated requests")
    if stats.sent < 10:
        problems.append(f"only {stats.sent} requests were sent")
    not_running = [n for n, s in after.items() if not s["running"]]
    if not_running:
        problems.append(f"vLLM not running on {', '.join(not_running)}")
    if name == "host-lost":
        problems += check_host_lost(result)
        return problems
    gates = gate_lines(output)
    if name in ("loaded", "slower") and not any(line.startswith("gate: ") and "Samples (s):" in line
                                                for line in gates):  # fmt: skip
        problems.append("the output shows no gate samples")
    if name == "slower" and "slower with confidence" not in output:
        problems.append("the gate did not find the canary slower with confidence")
    if name == "loaded":
        reported = [line for line in gates if line.startswith("report: ")]
        for node in after:
            if not any(f"report: {node} " in line and '"verdict": "pass"' in line for line in reported):
                problems.append(f"the gate report shows no pass of {node}")
    if name in ("upgrade", "rollback", "loaded"):
        want = (result.get("target") or image_b) if name != "rollback" else image_a
        if result["rc"] != 0:
            problems.append(f"the playbook failed (rc {result['rc']})")
        wrong = [n for n, s in after.items() if s["image"] != want or s["recorded_image"] != want]
        if wrong:
            problems.append(f"{', '.join(wrong)} do not run {want}")
    else:
        canary = canary or [next(iter(after))]
        if result["rc"] == 0:
            problems.append("the playbook succeeded with a bad canary")
        for needle in (
            "runs the version it ran before again",
            f"stops here: {len(after) - len(canary)} host(s) not reached",
        ):
            if needle not in output:
                problems.append(f"the failure message lacks {needle!r}")
        if not any(f"of {host}" in output for host in canary):
            problems.append(f"the failure message names none of {', '.join(canary)}")
        for host in canary:
            if (
                after[host]["version"] != before[host]["version"]
                or after[host]["image"] != before[host]["image"]
            ):
                problems.append(f"the canary {host} was not returned to {before[host]['image']}")
        for node in [n for n in after if n not in canary]:
            if after[node]["started"] != before[node]["started"]:
                problems.append(f"{node} was touched (its container restarted)")
    stuck = result.get("stuck")
    if stuck is not None:
        # the scenario must be the real one: a process in D state Docker's kill could not end
        if not stuck.d_state:
            problems.append("the canary never hung in the kernel (D state) on the stuck mount")
        if not stuck.running_after_kill:
            problems.append("Docker's SIGKILL ended the canary: the container was stoppable after all")
    return problems


def check_host_lost(result: dict) -> list[str]:
    """host-lost: the rollout stopped at the lost canary, which stayed drained and is named with what
    to do next; no host was restarted (the canary lost before its change included)."""
    lost: HostLost = result["lost"]
    before, after, message = result["before"], result["after"], failure_message(result["output"])
    problems = []
    if lost.paused_at is None:
        problems.append(f"{lost.node} was never seen drained on the gateway (never paused)")
    if result["rc"] == 0:
        problems.append("the playbook succeeded with a host lost")
    for needle in (
        f"of {lost.node} (",
        f"{lost.node} stopped answering once drained",
        "stays drained on every gateway",
        f"stops here: {len(after) - 1} host(s) not reached",
        "run playbooks/upgrade.yml again",
        f"ansible-playbook playbooks/undrain.yml --limit {lost.node}",
    ):
        if needle not in message:
            problems.append(f"the failure message lacks {needle!r}")
    if not lost.drained_after:
        problems.append(f"{lost.node} is not drained on the gateway after the rollout stopped")
    if not lost.undrained:
        problems.append(f"the message's undrain command did not put {lost.node} back in service")
    for node in after:
        if after[node]["started"] != before[node]["started"] or after[node]["image"] != before[node]["image"]:
            problems.append(f"{node} was touched (its container restarted or replaced)")
    return problems


def failure_message(output: str) -> str:
    """The rollout's own failure message (the last "failed at" error)."""
    found = ""
    for line in output.splitlines():
        if line.startswith("[ERROR]: Task failed: Action failed: ") and "failed at" in line:
            found = line.split("Action failed: ", 1)[1]
    return found


REMOVE_PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Remove the stuck container as the rollback does
      ansible.builtin.include_role:
        name: vllm_fleet.vllm_fleet.vllm_server
        tasks_from: remove
      vars:
        __vllm_server_remove: {name}
        vllm_server_stop_timeout: 5
        vllm_server_kill_wait: {kill_wait}
"""


def remove_stuck(env: dict[str, str], hold: float, kill_wait: int) -> int:
    """vllm_server's remove.yml against a container Docker cannot stop: its PID 1 in D state on the
    stuck mount, answered ``hold`` seconds after the first SIGKILL. ok: Docker failed, the role waited
    for the exit and removed the container."""
    sh("docker", "rm", "-f", STUCK_NAME, check=False)
    mount = StuckMount(f"{STUCK_ROOT}/.stuck").mount()
    events: list[str] = []
    t0 = time.monotonic()

    def note(text: str) -> None:
        events.append(f"+{time.monotonic() - t0:5.1f} s {text}")

    try:
        sh("docker", "run", "-d", "--name", STUCK_NAME, "--label", LABEL,
           "-v", f"{STUCK_ROOT}:{STUCK_ROOT}:ro", "--entrypoint", "/bin/sh", env["VLLM_FLEET_VLLM_IMAGE"],
           "-c", f"exec cat {STUCK_ROOT}/.stuck/stuck")  # fmt: skip
        if not wait_for(lambda: mount.held, 30):
            raise SystemExit("the container never reached the stuck mount")
        pid = mount.held[0][1]
        note(f"PID 1 ({pid}) waits on the mount")
        state = "?"

        def release() -> None:
            nonlocal state
            if wait_for(mount.killed, 600, 0.5):
                time.sleep(1)  # the fatal signal turns the wait uninterruptible
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                note(f"SIGKILL pending: Docker is killing it; state {state}")
                time.sleep(hold)
                mount.release()
                note("the mount answers")

        threading.Thread(target=release, daemon=True).start()
        with tempfile.TemporaryDirectory() as tmp:
            book = Path(tmp) / "remove.yml"
            book.write_text(REMOVE_PLAYBOOK.format(name=STUCK_NAME, kill_wait=kill_wait))
            start = time.monotonic()
            run = subprocess.run(["ansible-playbook", str(book)], cwd=REPO, capture_output=True, text=True,
                                 timeout=900, env={**env, "ANSIBLE_NOCOLOR": "1"})  # fmt: skip
            note(f"remove.yml ended: rc {run.returncode} after {time.monotonic() - start:.0f} s")
        said = "did not receive an exit event" in run.stdout + run.stderr
        left = sh("docker", "ps", "-aq", "--filter", f"name=^{STUCK_NAME}$").strip()
        for event in events:
            print(event)
        print(f"Docker said 'did not receive an exit event': {said}; D state: {state == 'D'}; "
              f"container left: {bool(left)}")  # fmt: skip
        ok = run.returncode == 0 and said and state == "D" and not left
        if not ok:
            print(run.stdout[-6000:], run.stderr[-2000:])
        print("result:", "ok" if ok else "FAILED")
        return 0 if ok else 1
    finally:
        mount.unmount()
        sh("docker", "rm", "-f", STUCK_NAME, check=False)
        subprocess.run(["rm", "-rf", STUCK_ROOT], check=False)


def _workdir(args: argparse.Namespace) -> Path:
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        return Path(args.workdir)
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}-"))


def run(args: argparse.Namespace) -> int:
    env = bootstrap_env()
    workdir = _workdir(args)
    bench = Bench(env, workdir, args.groups)
    bench.load_class = OpenAILoad if args.client == "openai" else StreamLoad
    bench.hold_after_kill = args.hold_after_kill
    image_a = bench.vllm_image
    print(f"upgrade under load: logs in {workdir}", flush=True)
    t0 = time.monotonic()
    results = []
    failed = False
    try:
        bench.up()
        print(
            f"fleet up (gateway + {len(bench.nodes)} nodes{', 2 serving groups' if args.groups else ''}, "
            f"version A) in {time.monotonic() - t0:.0f} s",
            flush=True,
        )
        small = {
            "vllm_server_ready_timeout_base": args.ready_timeout,
            "vllm_server_ready_timeout_max": args.ready_timeout,
            "fleet_rollout_gate_timeout": 30,
        }
        models_b = inventory(image_a, args.groups)["all"]["children"]["gpu_nodes"]["vars"][
            "vllm_server_models"
        ]
        canary_group = next(iter(GROUPS.values()))
        follower = canary_group[1]
        bad_args = [{**models_b[0], "extra_args": [*models_b[0].get("extra_args", []), "--no-such-flag"]}]
        phases = {
            "upgrade": ("playbooks/upgrade.yml", {"vllm_server_image": bench.image_b}),
            "never-ready": ("playbooks/upgrade.yml", {"vllm_server_image": bench.image_never, **small}),
            "bad-args": (
                "playbooks/upgrade.yml",
                {"vllm_server_image": bench.image_b, "vllm_server_models": bad_args},
            ),
            "wont-stop": ("playbooks/upgrade.yml", {"vllm_server_image": bench.image_stuck, **small}),
            "rollback": ("playbooks/rollback.yml", None),
            "host-lost": ("playbooks/upgrade.yml", None),  # its image: set when it runs
            "loaded": ("playbooks/upgrade.yml", None),  # its image: set when it runs
            "slower": ("playbooks/upgrade.yml", {"vllm_server_image": bench.image_slow, **SENSITIVE_GATE}),
            # the canary group's follower alone gets an image that never starts
            "follower-fails": (
                "playbooks/upgrade.yml",
                {
                    "vllm_server_image": f"{{{{ '{bench.image_never}' if inventory_hostname == '{follower}' "
                    f"else '{bench.image_b}' }}}}",
                    **small,
                },
            ),
        }
        if args.groups and args.phases == DEFAULT_PHASES:
            args.phases = "upgrade,follower-fails,rollback"
        for name in args.phases.split(","):
            playbook, extra = phases[name]
            if name == "host-lost":  # a change to make whatever the fleet runs now (after upgrade: back to A)
                now = bench.state()[bench.nodes[0]]["image"]
                extra = {"vllm_server_image": image_a if now == bench.image_b else bench.image_b,
                         "fleet_rollout_reconnect_timeout": 20}  # fmt: skip
            if name == "loaded":  # the same image under the other tag than the one running now
                now = bench.state()[bench.nodes[0]]["image"]
                extra = {"vllm_server_image": image_a if now == bench.image_b else bench.image_b,
                         **SENSITIVE_GATE}  # fmt: skip
            print(f"--- {name}: {playbook} {json.dumps(extra) if extra else ''}", flush=True)
            result = bench.phase(name, playbook, extra, args.clients, args.max_tokens, args.think)
            result["target"] = (extra or {}).get("vllm_server_image")
            result["problems"] = check_phase(
                result, image_a, bench.image_b, canary_group if args.groups else None
            )
            results.append(result)
            print(
                f"    rc {result['rc']}, {result['seconds']:.0f} s; load: {result['load'].summary()}",
                flush=True,
            )
            if result["kinds"]:
                print(f"    requests by kind: {result['kinds']}", flush=True)
            burners = f", {result['burners']} CPU burners" if result["burners"] else ""
            print(f"    machine: {load_summary(result['loadavg'])}{burners}", flush=True)
            if name in ("loaded", "slower"):
                for line in gate_lines(result["output"]):
                    print(f"    {line}", flush=True)
            if result["stuck"] is not None:
                for event in result["stuck"].events:
                    print(f"    canary: {event}", flush=True)
                said = "did not receive an exit event" in result["output"]
                print(f"    Docker said 'did not receive an exit event' in the rollout: {said}", flush=True)
            if result["lost"] is not None:
                for event in result["lost"].events:
                    print(f"    host: {event}", flush=True)
            if name not in ("upgrade", "rollback", "loaded"):
                print(f"    message: {failure_message(result['output'])}", flush=True)
            for error in result["load"].errors:
                print(f"    client error: {error}", flush=True)
            for problem in result["problems"]:
                print(f"    PROBLEM: {problem}", flush=True)
            failed = failed or bool(result["problems"])
    except Exception as exc:  # noqa: BLE001  # report, then clean up
        print(f"upgrade under load: {exc}", file=sys.stderr)
        failed = True
    finally:
        if not args.keep:
            bench.down()
    print()
    print(f"{'phase':<12} {'rc':>3} {'seconds':>8} {'sent':>6} {'failed':>6} {'truncated':>9}  checks")
    for r in results:
        stats = r["load"]
        checks = "ok" if not r["problems"] else "; ".join(r["problems"])
        print(f"{r['name']:<12} {r['rc']:>3} {r['seconds']:>8.0f} {stats.sent:>6} {stats.failed:>6} "
              f"{stats.truncated:>9}  {checks}")  # fmt: skip
    print(
        f"total {time.monotonic() - t0:.0f} s; {args.clients} {args.client} clients"
        f"{' (half streaming, half not, no retries)' if args.client == 'openai' else ' (streaming)'}, "
        f"max_tokens {args.max_tokens}"
    )
    print("result:", "FAILED" if failed else "0 failed, 0 truncated in every phase; every check passed")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", nargs="?", default="run", choices=["run", "up", "down", "remove-stuck"])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--think",
        type=float,
        default=1.0,
        help="seconds each client waits between requests (the CPU is shared)",
    )
    parser.add_argument("--phases", default=DEFAULT_PHASES)
    parser.add_argument(
        "--groups",
        action="store_true",
        help="two serving groups of two nodes (default phases upgrade,follower-fails,rollback)",
    )
    parser.add_argument(
        "--client",
        choices=["openai", "http"],
        default="openai",
        help="the load: the official openai client (streaming and plain threads) or raw HTTP streams",
    )
    parser.add_argument(
        "--ready-timeout", type=int, default=90, help="the readiness timeout of the bad canaries (seconds)"
    )
    parser.add_argument(
        "--hold-after-kill",
        type=float,
        default=40.0,
        help="wont-stop: seconds the canary stays unkillable after the first SIGKILL",
    )
    parser.add_argument("--keep", action="store_true", help="leave the fleet up after the run")
    parser.add_argument("--workdir", help="where the inventory and logs go (default: a new temporary folder)")
    args = parser.parse_args()
    if args.action == "run":
        return run(args)
    env = bootstrap_env()
    if args.action == "remove-stuck":
        return remove_stuck(env, args.hold_after_kill, 90)
    bench = Bench(env, _workdir(args), args.groups)
    if args.action == "up":
        bench.up()
        print(f"up: gateway {bench.gateway_url()} (key {CLIENT_KEY}), inventory {bench.inventory}")
    else:
        bench.down()
        print("down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
