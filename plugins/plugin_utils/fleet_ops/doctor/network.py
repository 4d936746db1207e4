"""Network checks: the ports the fleet plans to listen on are free (or held by their own service)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .containers import vllm_containers
from .results import FAIL, PASS, result


def _port_owners(rec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ports the host's variables plan, with the variable that sets each one."""
    owners = []
    for model in rec.get("served") or []:
        if model.get("port") not in (None, ""):
            owners.append(
                {
                    "port": int(model["port"]),
                    "owner": f"vllm_server_models[{model.get('name')}].port",
                    "model": model.get("name"),
                }
            )
    for extra in rec.get("extra_ports") or []:
        owners.append(
            {
                "port": int(extra["port"]),
                "owner": extra.get("owner") or "a planned service",
                "process": extra.get("process"),
            }
        )
    return owners


def check_ports(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    host, probe = rec["host"], rec.get("probe") or {}
    listeners = probe.get("listeners") or {}
    containers = vllm_containers(rec, settings)
    results = []
    for want in _port_owners(rec):
        port, owner = want["port"], want["owner"]
        subject = f"port {port} ({owner})"
        found = listeners.get(str(port)) or listeners.get(port) or []
        if not found:
            results.append(result("port_free", host, subject, PASS, "free"))
            continue
        procs = [p for entry in found for p in entry.get("processes") or []]
        shown = ", ".join(f"pid {p['pid']} ({p.get('cmdline') or '?'})" for p in procs) or (
            "a process of another PID namespace (a container sharing this network namespace)"
        )
        mine = [
            c
            for c in containers
            if c.get("port") == port
            and (c.get("labels") or {}).get(settings["label_prefix"] + ".model", want.get("model"))
            == want.get("model")
        ]
        if want.get("model") and mine and all("vllm" in (p.get("cmdline") or "") for p in procs):
            results.append(
                result(
                    "port_free",
                    host,
                    subject,
                    PASS,
                    f"in use by its own vLLM container {mine[0].get('name')}",
                )
            )
            continue
        if want.get("process") and procs and all(want["process"] in (p.get("cmdline") or "") for p in procs):
            results.append(
                result("port_free", host, subject, PASS, f"in use by {want['process']}, as planned")
            )
            continue
        results.append(
            result(
                "port_free",
                host,
                subject,
                FAIL,
                f"in use by {shown}",
                f"stop what listens on {port} (`ss -ltnp 'sport = :{port}'` on {host}) or move the service: "
                f"set {owner} to a free port",
            )
        )
    return results
