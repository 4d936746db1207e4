"""What to probe on each host, and the skeleton of its record, from the host's variables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...fleet_serving import lora
from ...fleet_serving.deploy import ServingError


def targets(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """What to probe on one host and the skeleton of its record, from the host's variables.

    ``host_vars``: ``host``, ``gpu_node``, ``writer``, ``storage_root``, ``served``
    (vllm_server_models), ``weights_models`` (model_weights_models), ``extra_ports``,
    ``gateway`` (``{http_port, https_port, tls}`` on gateways, else None), ``image``,
    ``image_cuda``, ``gpu_requests``, ``plan_options``, ``vllm_version``, ``adapters_root``
    (vllm_server_adapters_root).
    Returns the record (without ``probe``/``gpu``/``deployed``) and ``probe_args``.
    """
    gpu_node, writer = bool(host_vars.get("gpu_node")), bool(host_vars.get("writer"))
    root = str(host_vars.get("storage_root") or "/srv/models").rstrip("/") or "/"
    served = [dict(m) for m in host_vars.get("served") or [] if gpu_node]
    stored = []
    if writer:
        for model in host_vars.get("weights_models") or []:
            repo = model.get("repo_id") or f"local/{model.get('name')}"
            stored.append(
                {
                    "name": model.get("name"),
                    "repo_id": repo,
                    "revision": model.get("revision") or "main",
                    "source": model.get("source") or "huggingface",
                    "endpoint": model.get("endpoint"),
                }
            )
    extra = [dict(p) for p in host_vars.get("extra_ports") or []]
    gateway = host_vars.get("gateway")
    if gateway:
        if int(gateway.get("http_port") or 0) > 0:
            extra.append(
                {"port": int(gateway["http_port"]), "owner": "gateway_http_port", "process": "nginx"}
            )
        if gateway.get("tls"):
            extra.append(
                {
                    "port": int(gateway.get("https_port") or 443),
                    "owner": "gateway_https_port",
                    "process": "nginx",
                }
            )
    model_dirs = [
        {"name": m["name"], "base": f"{root}/{m['repo_id']}", "revision": m["revision"]} for m in stored
    ]
    model_dirs += [
        _served_dir(m, str(host_vars.get("adapters_root") or root)) for m in served if m.get("path")
    ]
    ports = sorted(
        {int(m["port"]) for m in served if m.get("port") not in (None, "")} | {int(p["port"]) for p in extra}
    )
    record = {
        "host": host_vars.get("host"),
        "gpu_node": gpu_node,
        "writer": writer,
        "storage_root": root,
        "served": served,
        "stored": stored,
        "extra_ports": extra,
        "image": host_vars.get("image") if gpu_node else None,
        "image_cuda": host_vars.get("image_cuda") or None,
        "gpu_requests": host_vars.get("gpu_requests"),
        "plan_options": dict(host_vars.get("plan_options") or {}),
        "vllm_version": host_vars.get("vllm_version"),
        "settings": dict(host_vars.get("settings") or {}),
    }
    record["probe_args"] = {
        "paths": [root] if (gpu_node or writer) else [],
        "model_dirs": model_dirs,
        "ports": ports,
        "images": [record["image"]] if record["image"] else [],
        "nvidia_smi": gpu_node,
    }
    return record


def _served_dir(model: Mapping[str, Any], adapters_root: str) -> dict[str, Any]:
    """The probe of a served model's folder, with its adapters' and drafter's folders: the doctor plans it
    as the serve stage does (fleet_serving/unit.py)."""
    out: dict[str, Any] = {"name": model.get("name"), "path": model.get("path")}
    try:
        found = lora.adapters([model], adapters_root)
    except ServingError:
        found = []  # validate names a bad adapter list; the model is then planned without adapters
    if found:
        out["adapters"] = [
            {"name": a["name"], "path": a["path"]}
            if not a["ref"]
            else {"name": a["name"], "base": a["path"].rsplit("/", 1)[0], "revision": a["revision"]}
            for a in found
        ]
    spec = model.get("speculative")
    if isinstance(spec, Mapping) and spec.get("model"):
        out["draft"] = str(spec["model"]).rstrip("/")
    return out
