"""Sleeping models on one host (#28): how the vllm_server role puts the host's sleep controller
(roles/vllm_server/files/vllm_fleet_sleepd.py) in front of the models that may sleep.

Exports:
  sleep_host(models, plans, settings) -> dict
      {} when no model of the host sets ``sleep``; else ``backends`` (name -> the loopback host, port and URL
      its vLLM moves to), ``config`` (the controller's JSON, checked), ``container`` (the controller
      container's name, command, mount folder and health URL) and ``awake`` (sleep.awake_check's figures)
  backend_port(port, offset) -> int

The controller takes each such model's public port (vllm_server_models[].port, on the host's listen address),
so the gateway, the rollout's drain and probes, Prometheus and the watchdog reach the model where they did;
the model's vLLM listens on 127.0.0.1 at port + ``backend_offset``, which only the controller (in the same
network namespace) reaches: clients never reach vLLM's /sleep and /wake_up. The controller's own metrics
are on ``controller_port``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .deploy import ServingError
from .sleep import awake_check, check_setting
from .sleep_control import controller_config
from .sleep_plan import sleep_budget

LOOPBACK = "127.0.0.1"
# where the controller's files (script, sleep_control.py, sleepd.json) appear in its container
MOUNT = "/opt/vllm-fleet-sleepd"


def backend_port(port: Any, offset: Any) -> int:
    return int(port) + int(offset)


def _sleepers(models: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out = []
    for m in models:
        problem = check_setting(m.get("sleep"), f"vllm_server_models[{m.get('name')}].sleep")
        if problem:
            raise ServingError(problem)
        if m.get("sleep") not in (None, False):
            out.append(m)
    return out


def sleep_host(
    models: Sequence[Mapping[str, Any]], plans: Mapping[str, Mapping[str, Any]], settings: Mapping[str, Any]
) -> dict[str, Any]:
    """``models``: the host's vllm_server_models; ``plans``: container key -> plan (a model's key is its
    name unless it runs on MIG instances); ``settings``: ``listen_address``, ``network_mode``,
    ``controller_port``, ``backend_offset``, ``idle_seconds``, ``wake_timeout``, ``container`` (its name),
    ``dir`` (the host folder mounted into it) - the role's vllm_server_sleep_* variables - and
    ``serving_group`` (true on a member of one)."""
    sleepers = _sleepers(models)
    if not sleepers:
        return {}
    names = [str(m["name"]) for m in sleepers]
    mode = str(settings.get("network_mode") or "")
    if mode != "host" and not mode.startswith("container:"):
        raise ServingError(
            f"vllm_server_network_mode {mode!r}: the models that may sleep ({', '.join(names)}) listen on "
            "127.0.0.1 behind the host's sleep controller, which needs their network namespace: use host (or "
            "container:<name>), or set sleep: false"
        )
    if settings.get("serving_group"):
        raise ServingError(
            f"vllm_server_models[{names[0]}]: sleep on a member of a serving group is not supported (the "
            "group's members start and stop together): set sleep: false"
        )
    on_mig = [str(m["name"]) for m in sleepers if m.get("mig") not in (None, "all")]
    if on_mig:
        raise ServingError(
            f"vllm_server_models[{on_mig[0]}]: sleep and mig together are not supported (a MIG instance is "
            "one model's alone): set sleep: false or serve it on whole GPUs"
        )
    controller_port = int(settings["controller_port"])
    offset = int(settings["backend_offset"])
    public = {int(m["port"]): f"vllm_server_models[{m['name']}]" for m in models}
    if controller_port in public:
        raise ServingError(
            f"vllm_server_sleep_controller_port {controller_port} is also the port of "
            f"{public[controller_port]}: choose another"
        )
    backends: dict[str, dict[str, Any]] = {}
    used: dict[int, str] = {}
    for m in sleepers:
        name = str(m["name"])
        port = backend_port(m["port"], offset)
        clash = public.get(port) or used.get(port) or ("the controller" if port == controller_port else None)
        if not 1 <= port <= 65535 or clash:
            raise ServingError(
                f"vllm_server_models[{name}]: its vLLM would listen on {LOOPBACK}:{port} (port "
                f"{m['port']} + vllm_server_sleep_backend_port_offset {offset}), "
                + (f"which {clash} uses" if clash else "outside 1-65535")
                + ": change vllm_server_sleep_backend_port_offset"
            )
        used[port] = f"vllm_server_models[{name}]"
        backends[name] = {"host": LOOPBACK, "port": port, "url": f"http://{LOOPBACK}:{port}"}
    missing = [n for n in names if n not in plans]
    if missing:
        raise ServingError(f"sleep controller: no plan for {', '.join(missing)}")
    # the sleepers share their GPUs with no other model (deploy.assign_gpu_sets)
    mine = {n: plans[n] for n in names}
    awake = awake_check(sleepers, mine, 1)
    budget = sleep_budget(sleepers, mine)
    config = controller_config(
        [
            {
                "name": str(m["name"]),
                "backend": backends[str(m["name"])]["url"],
                "level": int(m["sleep"]),
                "bytes": int(budget["bytes"][str(m["name"])]),
                "port": int(m["port"]),
            }
            for m in sleepers
        ],
        int(budget["budget_bytes"]),
        float(settings["idle_seconds"]),
        listen=str(settings["listen_address"]),
        port=controller_port,
        wake_timeout=float(settings["wake_timeout"]),
    )
    return {
        "models": names,
        "backends": backends,
        "config": config,
        "awake": awake,
        "container": {
            "name": str(settings["container"]),
            "dir": str(settings["dir"]),
            "mount": MOUNT,
            "command": [f"{MOUNT}/vllm_fleet_sleepd.py", f"{MOUNT}/sleepd.json"],
            "url": f"http://{settings['listen_address']}:{controller_port}",
        },
    }
