"""Memory checks: host RAM for the weights, /dev/shm and the IPC mode of the vLLM containers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .containers import vllm_containers
from .plans import Planner, plan_for
from .results import FAIL, MIB, PASS, SKIP, gib, result
from .storage import model_size


def check_ram(
    rec: Mapping[str, Any], settings: Mapping[str, Any], planner: Planner | None
) -> list[dict[str, Any]]:
    host, probe = rec["host"], rec.get("probe") or {}
    served = rec.get("served") or []
    if not served:
        return []
    total = (probe.get("memory") or {}).get("mem_total_bytes")
    if not total:
        return [
            result(
                "host_ram", host, "memory", SKIP, "MemTotal not readable", "check /proc/meminfo on the host"
            )
        ]
    factor = float(settings["ram_factor"])
    weights, parts, unknown = 0.0, [], []
    for model in served:
        name = model.get("name", "?")
        info = ((probe.get("model_dirs") or {}).get(name)) or {}
        size, source = model_size(info, (settings.get("model_sizes") or {}).get(name))
        if size is None:
            unknown.append(name)
            continue
        plan, _unused = plan_for(rec, model, planner)
        pp = int((plan or {}).get("pipeline_parallel_size") or 1)
        weights += size / pp
        parts.append(f"{name} {gib(size / pp)}" + (f" (1/{pp} of {gib(size)}, PP {pp})" if pp > 1 else ""))
    results = []
    if parts:
        need = factor * weights
        detail = f"{gib(total)} RAM; needs {factor:g} x {gib(weights)} weights = {gib(need)}: " + "; ".join(
            parts
        )
        if total >= need:
            results.append(result("host_ram", host, "memory", PASS, detail))
        else:
            results.append(
                result(
                    "host_ram",
                    host,
                    "memory",
                    FAIL,
                    detail,
                    f"add {gib(need - total)} of RAM, or serve fewer/smaller models on this host "
                    "(vllm_server_models), or a quantized checkpoint",
                )
            )
    results += [
        result(
            "host_ram",
            host,
            name,
            SKIP,
            f"size of {name} unknown (no safetensors index or weights in its path yet)",
            f"run playbooks/weights.yml first, or set fleet_doctor_model_sizes: {{{name}: BYTES}}",
        )
        for name in unknown
    ]
    return results


def _host_ipc(
    host: str,
    subject: str,
    measured: Any,
    host_shm: Mapping[str, Any],
    probe: Mapping[str, Any],
    min_bytes: int,
    container: Mapping[str, Any],
) -> dict[str, Any]:
    """ipc=host: vLLM gets the /dev/shm of the Docker engine's host. Judged by what the container sees; the
    probed host's own /dev/shm stands in only when the probe runs on that host (not in a container)."""
    need = min_bytes // MIB
    if measured is None and (probe.get("time") or {}).get("container"):
        why = container.get("dev_shm_error") or "not measured"
        return result(
            "shm_ipc",
            host,
            subject,
            SKIP,
            "ipc=host: the container shares the /dev/shm of the Docker engine's host, which this host "
            f"(itself a container) does not see, and measuring it inside the container failed ({why})",
        )
    size = measured if measured is not None else host_shm.get("total_bytes")
    seen = "the /dev/shm vLLM sees" if measured is not None else "the host's /dev/shm"
    if size is not None and int(size) < min_bytes:
        return result(
            "shm_ipc",
            host,
            subject,
            FAIL,
            f"ipc=host but {seen} is only {int(size) // MIB} MiB",
            f"enlarge /dev/shm on the Docker host of {host} (tmpfs size >= {need} MiB in /etc/fstab)",
        )
    shown = f", {int(size) // MIB} MiB" if size is not None else ""
    return result("shm_ipc", host, subject, PASS, f"ipc=host (shares the Docker host's /dev/shm{shown})")


def check_shm(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    host, probe = rec["host"], rec.get("probe") or {}
    if not (probe.get("docker") or {}).get("available"):
        if rec.get("gpu_node"):
            reason = (probe.get("docker") or {}).get("error") or "no Docker API socket"
            return [result("shm_ipc", host, "containers", SKIP, f"cannot list containers: {reason}")]
        return []
    min_bytes = int(settings["min_shm_mib"]) * MIB
    results = []
    host_shm = (probe.get("disks") or {}).get("/dev/shm") or {}
    containers = vllm_containers(rec, settings)
    if not containers and rec.get("gpu_node"):
        scope = " of this host (labelled)" if settings["container_scope"] == "labelled" else ""
        results.append(result("shm_ipc", host, "containers", PASS, f"no vLLM container{scope} is running"))
    for container in containers:
        name = container.get("name")
        model = (container.get("labels") or {}).get(settings["label_prefix"] + ".model")
        subject = f"container {name}" + (f" (model {model})" if model else "")
        ipc = container.get("ipc_mode") or "private"
        measured = container.get("dev_shm_bytes")
        # otherwise the container's own /dev/shm: as measured inside it, else its shm_size
        shm = measured if measured is not None else container.get("shm_size")
        if ipc == "host":
            results.append(_host_ipc(host, subject, measured, host_shm, probe, min_bytes, container))
        elif shm is not None and int(shm) >= min_bytes:
            results.append(
                result("shm_ipc", host, subject, PASS, f"ipc={ipc}, /dev/shm {int(shm) // MIB} MiB")
            )
        else:
            shown = f"{int(shm) // MIB} MiB" if shm else "Docker's default 64 MiB"
            results.append(
                result(
                    "shm_ipc",
                    host,
                    subject,
                    FAIL,
                    f"ipc={ipc} and /dev/shm {shown} < {min_bytes // MIB} MiB: vLLM's workers exchange "
                    "tensors "
                    "through shared memory and fail with 'Insufficient space in /dev/shm'",
                    "run vLLM with --ipc=host: set vllm_server_ipc_mode: host (the default), or "
                    f"vllm_server_shm_size >= {min_bytes // MIB}m, then redeploy with playbooks/serve.yml",
                )
            )
    return results
