#!/usr/bin/env python3
"""vLLM watchdog: a real short inference request to every vLLM container of this host.

Run by a systemd timer (one pass per activation). Each check is one completion with
max_tokens=1 and a short timeout. After N consecutive failures of a running (or
paused) container it restarts the container through the Docker API. Containers that
are starting (within their grace period), stopped, missing, or under maintenance
(a file named after the container in the maintenance directory) are not counted.
Every check is logged on stdout (the journal); the state of each target is written
as node-exporter textfile metrics. A target with ``adapters`` (LoRA adapters vLLM loaded
at runtime, which a restart drops) gets the ones its /v1/models lacks loaded again, once
per container start: adapters the playbook unloads on purpose stay unloaded. A follower of a
serving group (``check: running``) serves no HTTP: its check is its running, unpaused container
(its rank 0's completions probe the replica), so a dead follower shows as not_running here.
Models that may sleep (``sleep``) share their GPUs and have no Docker restart policy: Docker would
start them all at once after a reboot, and each vLLM refuses to start into less free GPU memory than
its plan gives it. The watchdog starts a stopped one itself, one per pass, once every other one
answers and has been put to sleep, then restarts the sleep controller so it reads them again.

Usage: vllm_fleet_watchdog.py --config /etc/vllm-fleet/watchdog.json
Python 3 standard library only; the Docker client is vllm_fleet_docker_api.py beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

# installed next to this script by the vllm_server role (the collection's module_utils/docker_api.py)
from vllm_fleet_docker_api import DockerClient

DEFAULTS: dict[str, Any] = {
    "timeout": 5.0,
    "failures_before_restart": 3,
    "startup_grace": 300,
    "restart_stop_timeout": 30,
    "docker_socket": "/var/run/docker.sock",
    "state_file": "/var/lib/vllm-fleet/watchdog-state.json",
    "textfile": "/var/lib/prometheus/node-exporter/vllm_watchdog.prom",
    "maintenance_dir": "/run/vllm-fleet/maintenance",
    "targets": [],
}


# --- the inference check ------------------------------------------------------------------------------
# task -> (path, request, the key a real answer carries): a pooling model is asked what it does
PROBES: dict[str, tuple[str, dict[str, Any], str]] = {
    "generate": ("/v1/completions", {"prompt": "ping", "max_tokens": 1, "temperature": 0}, "choices"),
    "embed": ("/v1/embeddings", {"input": "ping"}, "data"),
    "score": ("/rerank", {"query": "ping", "documents": ["ping"]}, "results"),
}


def probe(target: dict[str, Any], timeout: float) -> tuple[bool, str, float]:
    """One real request of the model's task (a completion with max_tokens=1): (ok, reason, seconds)."""
    path, request, key = PROBES.get(str(target.get("task") or "generate"), PROBES["generate"])
    payload = dict(request, model=target["model"])
    headers = {"Content-Type": "application/json"}
    if target.get("api_key"):
        headers["Authorization"] = "Bearer " + str(target["api_key"])
    url = str(target["url"]).rstrip("/") + path
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = json.loads(resp.read())
        if not body.get(key):
            return False, f"answer has no {key}", time.monotonic() - start
        return True, "ok", time.monotonic() - start
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}", time.monotonic() - start
    except (OSError, ValueError) as exc:  # timeouts, refused connections, bad JSON
        reason = (
            "timeout"
            if isinstance(exc, (TimeoutError, socket.timeout)) or "timed out" in str(exc)
            else str(exc)
        )
        return False, reason, time.monotonic() - start


# --- LoRA adapters loaded at runtime -------------------------------------------------------------------
def _request(target: dict[str, Any], path: str, body: dict[str, Any] | None, timeout: float) -> Any:
    headers = {"Content-Type": "application/json"}
    if target.get("api_key"):
        headers["Authorization"] = "Bearer " + str(target["api_key"])
    url = str(target["url"]).rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
    return json.loads(raw) if body is None else raw.decode(errors="replace")


def missing_adapters(served: Any, model: str, adapters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The adapters that vLLM's /v1/models body does not list under ``model`` (its ``parent``)."""
    data = served.get("data") if isinstance(served, dict) else None
    listed = {c.get("id") for c in data or [] if isinstance(c, dict) and c.get("parent") == model}
    return [a for a in adapters if a.get("name") not in listed]


def restore_adapters(target: dict[str, Any], timeout: float) -> list[tuple[str, str]]:
    """Load the target's adapters its vLLM lacks: ``[(name, "loaded" or why not)]``."""
    served = _request(target, "/v1/models", None, timeout)
    out = []
    for adapter in missing_adapters(served, str(target["model"]), list(target.get("adapters") or [])):
        body = {"lora_name": adapter["name"], "lora_path": adapter["path"]}
        try:
            _request(target, "/v1/load_lora_adapter", body, max(timeout, 120.0))
            out.append((str(adapter["name"]), "loaded"))
        except urllib.error.HTTPError as exc:
            out.append((str(adapter["name"]), f"HTTP {exc.code}"))
    return out


def member_check(info: dict[str, Any]) -> tuple[bool, str, float]:
    """A follower's check, from its container: running and not paused (it has no API to ask)."""
    state = info.get("State") or {}
    if state.get("Paused"):
        return False, "paused", 0.0
    return bool(state.get("Running")), "container running", 0.0


def parse_docker_time(value: str | None) -> float | None:
    """Unix time of a Docker RFC 3339 timestamp (nanoseconds dropped); None for zero/empty."""
    if not value or value.startswith("0001-01-01"):
        return None
    main, _sep, frac = value.rstrip("Z").partition(".")
    try:
        # timezone.utc, not datetime.UTC: GPU hosts may run Python 3.10
        parsed = datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)  # noqa: UP017
        stamp = parsed.timestamp()
    except ValueError:
        return None
    digits = "".join(ch for ch in frac if ch.isdigit())[:6]
    return stamp + (int(digits) / 10 ** len(digits) if digits else 0.0)


def decide(
    prev: dict[str, Any],
    *,
    now: float,
    info: dict[str, Any] | None,
    maintenance: bool,
    result: tuple[bool, str, float] | None,
    threshold: int,
    grace: float,
) -> tuple[dict[str, Any], str, bool]:
    """Next state of one target, the check's outcome, and whether to restart the container now.

    Outcomes: ok, fail, starting (failure inside the grace period after the container
    started), paused (failure of a paused container, counted), maintenance, not_running, missing.
    """
    state = dict(prev)
    state.setdefault("consecutive_failures", 0)
    state.setdefault("restarts_total", 0)
    state.setdefault("restart_failures_total", 0)
    state.setdefault("last_success", 0.0)
    state["last_check"] = now
    if maintenance:
        state["consecutive_failures"] = 0
        return state, "maintenance", False
    if info is None:
        state["consecutive_failures"] = 0
        return state, "missing", False
    docker_state = info.get("State") or {}
    if not docker_state.get("Running") and not docker_state.get("Paused"):
        state["consecutive_failures"] = 0
        return state, "not_running", False
    assert result is not None
    ok, _reason, _seconds = result
    if ok:
        state["consecutive_failures"] = 0
        state["last_success"] = now
        return state, "ok", False
    paused = bool(docker_state.get("Paused"))
    started = parse_docker_time(docker_state.get("StartedAt"))
    if not paused and started is not None and now - started < grace:
        state["consecutive_failures"] = 0
        return state, "starting", False
    state["consecutive_failures"] += 1
    outcome = "paused" if paused else "fail"
    return state, outcome, state["consecutive_failures"] >= threshold


# --- models that may sleep: started one at a time ------------------------------------------------------
def sleep_step(
    sleepers: list[dict[str, Any]],
    infos: dict[str, dict[str, Any] | None],
    healthy: Callable[[dict[str, Any]], bool],
    pending: bool,
) -> dict[str, Any]:
    """What to do this pass for the models that may sleep (targets with ``sleep``, in declared order).

    ``infos``: container -> Docker's inspect (None: missing, or not read: under maintenance);
    ``healthy(target)``: its vLLM answers /health on its loopback port; ``pending``: one was started and
    the controller not restarted since.
    ``{"action": "start", "start": target, "sleep": [targets]}`` puts the running ones to sleep and starts
    the first stopped one; ``wait`` (one is still starting); ``controller`` (every one runs and answers
    after a start: the controller restarts to read them); ``none``. A container never started (the role
    creates it and starts it itself) or under maintenance (a rollout, an operator) is left alone.
    """
    running, stopped = [], []
    for target in sleepers:
        info = infos.get(target["container"])
        if info is None:
            continue
        state = info.get("State") or {}
        if state.get("Running") or state.get("Paused"):
            running.append(target)
        elif parse_docker_time(state.get("StartedAt")) is not None:
            stopped.append(target)
    waiting = [t for t in running if not healthy(t)]
    if waiting:
        return {"action": "wait", "starting": waiting}
    if stopped:
        return {"action": "start", "start": stopped[0], "sleep": running}
    return {"action": "controller" if pending and running else "none"}


def backend_health(target: dict[str, Any], timeout: float) -> bool:
    """The vLLM behind the sleep controller answers /health on its loopback port (without waking it)."""
    try:
        with urllib.request.urlopen(f"{target['sleep']['url']}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def put_to_sleep(target: dict[str, Any], timeout: float) -> str:
    """POST /sleep to one vLLM; vLLM answers at once for one already asleep."""
    sleep = target["sleep"]
    request = urllib.request.Request(
        f"{sleep['url']}/sleep?level={int(sleep['level'])}",
        method="POST",
        headers={"Authorization": f"Bearer {target.get('api_key', '')}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=max(timeout, 120.0)) as resp:
            return f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return f"error {exc!r}"


def run_sleepers(
    cfg: dict[str, Any],
    memo: dict[str, Any],
    infos: dict[str, dict[str, Any] | None],
    *,
    docker: Any,
    healthy: Callable[[dict[str, Any]], bool],
    asleep: Callable[[dict[str, Any]], str],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One pass of :func:`sleep_step`, done, on the inspections of this pass (``infos``: container -> its
    inspect; absent where Docker could not be read, and then nothing is started). ``memo`` (the state file's
    ``_sleep``): whether a start awaits the controller's restart; returns it updated."""
    memo = dict(memo)
    sleepers = [t for t in cfg["targets"] if t.get("sleep")]
    if any(t["container"] not in infos for t in sleepers):
        return memo  # the pass logged why Docker could not be read
    step = sleep_step(sleepers, infos, healthy, bool(memo.get("pending")))
    if step["action"] == "start":
        for target in step["sleep"]:
            result = asleep(target)
            log(f"model={target['model']} container={target['container']} action=sleep result={result}")
        target = step["start"]
        try:
            docker.start(target["container"])
            memo["pending"] = True
            log(f"model={target['model']} container={target['container']} action=start (the others asleep)")
        except (OSError, RuntimeError) as exc:
            log(f"model={target['model']} container={target['container']} action=start_failed reason={exc!r}")
    elif step["action"] == "wait":
        names = ",".join(t["model"] for t in step["starting"])
        log(f"models={names} action=sleep_start outcome=waiting (not answering yet)")
    elif step["action"] == "controller" and cfg.get("sleep_controller"):
        try:
            docker.restart(cfg["sleep_controller"], int(cfg["restart_stop_timeout"]))
            memo["pending"] = False
            log(f"container={cfg['sleep_controller']} action=restart (models that may sleep started)")
        except (OSError, RuntimeError) as exc:
            log(f"container={cfg['sleep_controller']} action=restart_failed reason={exc!r}")
    return memo


# --- metrics -------------------------------------------------------------------------------------------
METRICS = (
    ("vllm_watchdog_up", "gauge", "1 when the last inference check succeeded.", "up"),
    ("vllm_watchdog_last_check_timestamp_seconds", "gauge", "Unix time of the last check.", "last_check"),
    (
        "vllm_watchdog_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the last successful check.",
        "last_success",
    ),
    ("vllm_watchdog_check_duration_seconds", "gauge", "Duration of the last check.", "duration"),
    ("vllm_watchdog_consecutive_failures", "gauge", "Failed checks in a row.", "consecutive_failures"),
    ("vllm_watchdog_restarts_total", "counter", "Container restarts done by the watchdog.", "restarts_total"),
    (
        "vllm_watchdog_restart_failures_total",
        "counter",
        "Restarts that the Docker API refused.",
        "restart_failures_total",
    ),
)


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(states: dict[str, dict[str, Any]], targets: list[dict[str, Any]]) -> str:
    """Prometheus text exposition of every target's state (stable order)."""
    lines: list[str] = []
    for name, kind, help_text, key in METRICS:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for target in sorted(targets, key=lambda t: t["container"]):
            state = states.get(target["container"], {})
            labels = f'model="{_label(target["model"])}",container="{_label(target["container"])}"'
            value = state.get(key, 0)
            if key == "up":
                value = 1 if state.get("outcome") == "ok" else 0
            lines.append(
                f"{name}{{{labels}}} {float(value or 0):.3f}"
                if isinstance(value, float)
                else f"{name}{{{labels}}} {int(value or 0)}"
            )
    name = "vllm_watchdog_outcome"
    lines.append(f"# HELP {name} Outcome of the last check (1 for the current outcome).")
    lines.append(f"# TYPE {name} gauge")
    for target in sorted(targets, key=lambda t: t["container"]):
        state = states.get(target["container"], {})
        labels = f'model="{_label(target["model"])}",container="{_label(target["container"])}"'
        lines.append(f'{name}{{{labels},outcome="{_label(state.get("outcome", "none"))}"}} 1')
    return "\n".join(lines) + "\n"


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".vllm_watchdog.", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --- one pass ------------------------------------------------------------------------------------------
def run_once(
    config: dict[str, Any],
    states: dict[str, dict[str, Any]],
    *,
    docker: Any,
    check: Callable[[dict[str, Any], float], tuple[bool, str, float]] = probe,
    now: Callable[[], float] = time.time,
    log: Callable[[str], None] = print,
    maintenance: Callable[[str], bool] | None = None,
    restore: Callable[[dict[str, Any], float], list[tuple[str, str]]] = restore_adapters,
    sleep_health: Callable[[dict[str, Any], float], bool] = backend_health,
    sleep_put: Callable[[dict[str, Any], float], str] = put_to_sleep,
) -> dict[str, dict[str, Any]]:
    """Check every target once; restart where needed; start a stopped model that may sleep once the
    others sleep. Returns the new states (by container, and ``_sleep``)."""
    cfg = {**DEFAULTS, **config}
    if maintenance is None:

        def maintenance(container: str) -> bool:
            return os.path.exists(os.path.join(cfg["maintenance_dir"], container))

    new_states: dict[str, dict[str, Any]] = {}
    infos: dict[str, dict[str, Any] | None] = {}  # this pass's inspections (None: missing or not read)
    for target in cfg["targets"]:
        container = target["container"]
        threshold = int(target.get("failures_before_restart", cfg["failures_before_restart"]))
        grace = float(target.get("startup_grace", cfg["startup_grace"]))
        in_maintenance = maintenance(container)
        info = None
        result = None
        if not in_maintenance:
            try:
                info = docker.inspect(container)
            except (OSError, RuntimeError, ValueError) as exc:
                log(f"model={target['model']} container={container} outcome=error reason={exc!r}")
                new_states[container] = {**states.get(container, {}), "outcome": "error", "last_check": now()}
                continue
            if info is not None and ((info.get("State") or {}).get("Running")):
                result = (
                    member_check(info)
                    if target.get("check") == "running"
                    else check(target, float(cfg["timeout"]))
                )
        infos[container] = info
        state, outcome, restart = decide(
            states.get(container, {}),
            now=now(),
            info=info,
            maintenance=in_maintenance,
            result=result,
            threshold=threshold,
            grace=grace,
        )
        state["outcome"] = outcome
        state["duration"] = round(result[2], 3) if result else 0.0
        reason = result[1] if result else outcome
        member = f" group={target['group']} rank={target.get('rank', '?')}" if target.get("group") else ""
        log(
            f"model={target['model']} container={container} outcome={outcome} reason={reason!r} "
            f"seconds={state['duration']} consecutive_failures={state['consecutive_failures']}/{threshold}"
            f"{member}"
        )
        started_at = ((info or {}).get("State") or {}).get("StartedAt")
        if outcome == "ok" and target.get("adapters") and state.get("adapters_loaded_for") != started_at:
            try:
                loads = restore(target, float(cfg["timeout"]))
            except (OSError, ValueError) as exc:
                loads = [("*", f"error {exc!r}")]
            for adapter, result in loads:
                log(
                    f"model={target['model']} container={container} action=load_adapter adapter={adapter} "
                    f"result={result}"
                )
            if all(result == "loaded" for _adapter, result in loads):
                state["adapters_loaded_for"] = started_at
        if restart:
            try:
                docker.restart(container, int(cfg["restart_stop_timeout"]))
                state["restarts_total"] += 1
                state["consecutive_failures"] = 0
                state["last_restart"] = now()
                log(
                    f"model={target['model']} container={container} action=restart "
                    f"after {threshold} failed checks "
                    f"(restarts_total={state['restarts_total']})"
                )
            except (OSError, RuntimeError) as exc:
                state["restart_failures_total"] += 1
                log(f"model={target['model']} container={container} action=restart_failed reason={exc!r}")
        new_states[container] = state
    if any(t.get("sleep") for t in cfg["targets"]):
        timeout = float(cfg["timeout"])
        new_states["_sleep"] = run_sleepers(
            cfg,
            dict(states.get("_sleep") or {}),
            infos,
            docker=docker,
            healthy=lambda t: sleep_health(t, timeout),
            asleep=lambda t: sleep_put(t, timeout),
            log=log,
        )
    return new_states


def load_json(path: str, default: Any) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="/etc/vllm-fleet/watchdog.json")
    args = parser.parse_args(argv)
    config = load_json(args.config, None)
    if not isinstance(config, dict):
        print(f"cannot read the watchdog configuration {args.config}", file=sys.stderr)
        return 2
    cfg = {**DEFAULTS, **config}
    states = load_json(cfg["state_file"], {})
    if not isinstance(states, dict):
        states = {}
    new_states = run_once(cfg, states, docker=DockerClient(cfg["docker_socket"]))
    write_atomic(cfg["state_file"], json.dumps(new_states, indent=1, sort_keys=True), 0o600)
    write_atomic(cfg["textfile"], render_metrics(new_states, cfg["targets"]))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
