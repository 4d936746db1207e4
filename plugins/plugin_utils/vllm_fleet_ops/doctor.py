"""Preflight doctor: facts in, one result per check out, each with a fix.

Input is one record per host (built by playbooks/doctor.yml from the probe module, the
GPU facts and the host's variables) plus fleet-wide settings and the Hugging Face access
probes. Every check returns results ``{check, host, subject, status, detail, fix}``
with status ``pass``, ``warn``, ``fail`` or ``skip``; a skip always says why.

Host record keys (all optional unless noted):

``host`` (required), ``gpu_node`` (bool), ``writer`` (bool: the host that downloads the
weights), ``probe`` (the ``vllm_fleet_doctor_probe`` result), ``gpu`` (the
``nvidia_gpu`` facts), ``served`` (``vllm_server_models`` of the host), ``stored``
(``model_weights_models`` the host stores: ``{name, repo_id, revision, dir}``),
``storage_root``, ``extra_ports`` (``[{port, owner}]``), ``image`` (the vLLM image),
``image_cuda`` (declared CUDA version of the image), ``gpu_requests`` (bool),
``plan_options``, ``vllm_version``, ``deployed`` (the ``vllm_fleet`` local fact),
``settings`` (the host's thresholds, winning over the fleet-wide ones), ``received_time`` (the
control node's clock when the probe's answer arrived).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..vllm_planner.options import merge_plan_options
from .textable import render_table

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
ORDER = {FAIL: 0, WARN: 1, SKIP: 2, PASS: 3}
GIB = 1024**3
MIB = 1024**2

DEFAULT_SETTINGS: dict[str, Any] = {
    "disk_factor": 1.2,
    "ram_factor": 1.5,
    "min_shm_mib": 1024,
    "allow_mig": False,
    "max_clock_skew_s": 5.0,
    "label_prefix": "io.vllm-fleet",
    "container_scope": "all",  # all | labelled
    "model_sizes": {},
}

# Planner hook: (config, gpu_facts, options) -> plan dict. Injected so this module stays pure.
Planner = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]


def result(check: str, host: str, subject: str, status: str, detail: str, fix: str = "") -> dict[str, Any]:
    if status not in ORDER:
        raise ValueError(f"unknown status {status!r}")
    return {"check": check, "host": host, "subject": subject, "status": status, "detail": detail, "fix": fix}


def gib(n: float | None) -> str:
    if n is None:
        return "?"
    return f"{n / GIB:.1f} GiB" if abs(n) >= GIB or n == 0 else f"{n / MIB:.1f} MiB"


# --- model sizes ------------------------------------------------------------------------------


def model_size(model_dir: Mapping[str, Any] | None, declared: Any = None) -> tuple[int | None, str]:
    """Total weight bytes of a model and where the figure comes from.

    Order: a size the inventory declares, the safetensors index the weights role fetched
    first (``metadata.total_size``), the weight files already on disk.
    """
    if declared not in (None, "", 0):
        return int(declared), "declared"
    info = model_dir or {}
    if info.get("index_total_size"):
        return int(info["index_total_size"]), "safetensors index"
    if info.get("weights_bytes"):
        return int(info["weights_bytes"]), "weight files on disk"
    return None, ""


# --- checks -----------------------------------------------------------------------------------


def check_disk(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    host, probe = rec["host"], rec.get("probe") or {}
    factor = float(settings["disk_factor"])
    models = list(rec.get("stored") or [])
    if rec.get("gpu_node"):
        stored_names = {m.get("name") for m in models}
        models += [m for m in rec.get("served") or [] if m.get("name") not in stored_names]
    if not models:
        return []
    root = rec.get("storage_root") or "/"
    disk = (probe.get("disks") or {}).get(root)
    if not disk:
        return [
            result("disk_space", host, root, SKIP, "the probe did not read this path", "run the doctor again")
        ]
    dirs = probe.get("model_dirs") or {}
    need, parts, unknown = 0.0, [], []
    for model in models:
        name = model.get("name", "?")
        info = dirs.get(name) or {}
        size, source = model_size(info, (settings.get("model_sizes") or {}).get(name))
        if size is None:
            unknown.append(name)
            continue
        present = int(info.get("bytes_present") or 0)
        missing = max(0.0, factor * size - present)
        need += missing
        shown = f", {gib(present)} present" if present >= GIB / 10 else ""
        parts.append(f"{name} {gib(size)} ({source}{shown})")
    results = []
    free = int(disk.get("free_bytes") or 0)
    where = f"{root} (on {disk.get('mount') or disk.get('path')})"
    if parts:
        detail = f"{gib(free)} free; needs {factor:g} x model size - present = {gib(need)}: " + "; ".join(
            parts
        )
        if free >= need:
            results.append(result("disk_space", host, where, PASS, detail))
        else:
            results.append(
                result(
                    "disk_space",
                    host,
                    where,
                    FAIL,
                    detail,
                    f"free {gib(need - free)} on {disk.get('mount') or root}, or point model_weights_root "
                    "at a "
                    f"larger volume, or remove models from model_weights_models / vllm_server_models",
                )
            )
    for name in unknown:
        results.append(
            result(
                "disk_space",
                host,
                f"{root}: {name}",
                SKIP,
                f"size of {name} unknown: no safetensors index or weight files under its folder yet",
                "run playbooks/weights.yml (it fetches the metadata first) or set "
                f"fleet_doctor_model_sizes: {{{name}: BYTES}}",
            )
        )
    return results


def _plan_for(
    rec: Mapping[str, Any], model: Mapping[str, Any], planner: Planner | None
) -> tuple[Mapping[str, Any] | None, str]:
    """The plan of one served model: the one recorded at deployment, else computed now."""
    deployed = ((rec.get("deployed") or {}).get("models") or {}).get(model.get("name")) or {}
    recorded = (deployed.get("current") or {}).get("plan")
    if recorded:
        return recorded, "deployed plan"
    info = ((rec.get("probe") or {}).get("model_dirs") or {}).get(model.get("name")) or {}
    config, gpu = info.get("config"), rec.get("gpu")
    if planner is None or not config or not (gpu or {}).get("present"):
        overrides = model.get("overrides") or {}
        given = {
            k: int(overrides[k])
            for k in ("tensor_parallel_size", "pipeline_parallel_size")
            if overrides.get(k)
        }
        return (given, "overrides") if given else (None, "")
    options = merge_plan_options(
        rec.get("vllm_version"), rec.get("plan_options"), model.get("overrides"), model.get("name")
    )
    try:
        return planner(config, gpu, options), "planned now"
    except ValueError as exc:
        return {"error": str(exc)}, "planner refused the input"


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
        plan, _ = _plan_for(rec, model, planner)
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


def _vllm_containers(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    prefix = settings["label_prefix"]
    out = []
    for container in (rec.get("probe") or {}).get("containers") or []:
        if not container.get("vllm") or not container.get("running"):
            continue
        labels = container.get("labels") or {}
        owner = labels.get(prefix + ".host")
        if owner is not None and owner != rec["host"]:
            continue  # another host's container on a shared engine
        if owner is None and settings["container_scope"] == "labelled":
            continue
        out.append(container)
    return out


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
    containers = _vllm_containers(rec, settings)
    if not containers and rec.get("gpu_node"):
        scope = " of this host (labelled)" if settings["container_scope"] == "labelled" else ""
        results.append(result("shm_ipc", host, "containers", PASS, f"no vLLM container{scope} is running"))
    for container in containers:
        name = container.get("name")
        model = (container.get("labels") or {}).get(settings["label_prefix"] + ".model")
        subject = f"container {name}" + (f" (model {model})" if model else "")
        ipc = container.get("ipc_mode") or "private"
        shm = container.get("shm_size")
        if ipc == "host":
            size = host_shm.get("total_bytes")
            if size is not None and size < min_bytes:
                results.append(
                    result(
                        "shm_ipc",
                        host,
                        subject,
                        FAIL,
                        f"ipc=host but the host's /dev/shm is only {size // MIB} MiB",
                        f"enlarge /dev/shm on {host} (tmpfs size >= {min_bytes // MIB} MiB in /etc/fstab)",
                    )
                )
            else:
                results.append(
                    result("shm_ipc", host, subject, PASS, "ipc=host (shares the host's /dev/shm)")
                )
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


def _port_owners(rec: Mapping[str, Any]) -> list[dict[str, Any]]:
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
    containers = _vllm_containers(rec, settings)
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


def hub_results(
    checks: Iterable[Mapping[str, Any]], offline: bool, models_declared: int
) -> list[dict[str, Any]]:
    """Results of the Hugging Face access probes (HEAD of a file with the token).

    ``checks``: ``{name, repo_id, revision, endpoint, status (HTTP code, -1 = no answer),
    token_set, host, msg}``.
    """
    checks = list(checks)
    if offline:
        return [
            result(
                "hf_access",
                "-",
                "hub",
                SKIP,
                "offline: fleet_doctor_hub_offline is true (air-gapped fleet or staged weights)",
                "",
            )
        ]
    if not checks:
        what = "no Hugging Face model in model_weights_models" if models_declared else "no model declared"
        return [result("hf_access", "-", "hub", SKIP, f"{what}: nothing to check")]
    out = []
    for c in checks:
        subject = f"{c.get('repo_id')}@{c.get('revision')}"
        host = c.get("host") or "-"
        status = int(c.get("status") if c.get("status") not in (None, "") else -1)
        token = "with the token" if c.get("token_set") else "without a token"
        url = f"{(c.get('endpoint') or 'https://huggingface.co').rstrip('/')}/{c.get('repo_id')}"
        if 200 <= status < 400:
            out.append(result("hf_access", host, subject, PASS, f"HTTP {status} {token}"))
        elif status == 401:
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    FAIL,
                    f"HTTP 401 {token}: the repo is gated or private and the token is missing or invalid",
                    "put a read token in Vault and set model_weights_hf_token "
                    "(ansible-vault encrypt_string 'hf_...' --name vault_hf_token)",
                )
            )
        elif status == 403:
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    FAIL,
                    f"HTTP 403 {token}: the token's account has not been granted access to this gated repo",
                    f"accept the model's licence at {url} with the account that owns model_weights_hf_token",
                )
            )
        elif status == 404:
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    FAIL,
                    "HTTP 404: no such repo, revision or config.json",
                    f"check repo_id and revision of model {c.get('name')} in model_weights_models",
                )
            )
        else:
            reason = f"HTTP {status}" if status > 0 else (c.get("msg") or "no answer")
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    WARN,
                    f"could not ask the hub from {host}: {reason}",
                    "check the proxy/firewall of the writer host, set model_weights_hf_endpoint to a "
                    "reachable "
                    "mirror, or set fleet_doctor_hub_offline: true for an air-gapped fleet",
                )
            )
    return out


def check_cuda(
    rec: Mapping[str, Any], settings: Mapping[str, Any], cuda_check: Callable[..., Any] | None
) -> list[dict[str, Any]]:
    host, probe, gpu = rec["host"], rec.get("probe") or {}, rec.get("gpu") or {}
    if not rec.get("gpu_node"):
        return []
    if not gpu.get("present"):
        return []  # check_gpu_state reports it
    driver_cuda = gpu.get("cuda_version")
    results = []
    images: dict[str, Any] = {}
    if rec.get("image"):
        images[rec["image"]] = None
    for container in _vllm_containers(rec, settings):
        images.setdefault(container.get("image"), None)
    inspected = probe.get("images") or {}
    declared = rec.get("image_cuda")
    for image in images:
        info = inspected.get(image) or {}
        cuda = declared or info.get("cuda_version")
        subject = f"image {image}"
        if not cuda:
            why = (
                "not on the host yet"
                if not info.get("present")
                else (
                    "declares no CUDA version (CUDA_VERSION env / com.nvidia.cuda.version label): a CPU "
                    "image?"
                )
            )
            results.append(
                result(
                    "cuda_compat",
                    host,
                    subject,
                    SKIP,
                    why,
                    "set fleet_doctor_image_cuda_version to the image's CUDA version to check it before "
                    "pulling",
                )
            )
            continue
        if not driver_cuda or cuda_check is None:
            results.append(result("cuda_compat", host, subject, SKIP, "the driver's CUDA version is unknown"))
            continue
        verdict = cuda_check(driver_cuda, cuda)
        detail = (
            f"driver {gpu.get('driver_version')} runs CUDA <= {verdict['driver_cuda']}; "
            f"image needs CUDA {verdict['image_cuda']}"
        )
        if verdict["ok"]:
            results.append(result("cuda_compat", host, subject, PASS, detail))
        else:
            branch = verdict.get("min_branch")
            results.append(
                result(
                    "cuda_compat",
                    host,
                    subject,
                    FAIL,
                    detail
                    + " (the container would fail with 'unsatisfied condition: cuda>=' or CUDA error 804)",
                    (
                        f'upgrade the driver to branch {branch} or newer (nvidia_driver_branch: "{branch}", '
                        "playbooks/hosts.yml)"
                        if branch
                        else "upgrade the driver"
                    )
                    + f", or use an image built for CUDA {verdict['driver_cuda']} or older "
                    "(vllm_server_image)",
                )
            )
    toolkit = probe.get("toolkit") or {}
    if rec.get("gpu_requests") is False:
        results.append(
            result(
                "container_toolkit",
                host,
                "nvidia runtime",
                SKIP,
                "GPU requests are off (vllm_server_gpu_requests)",
            )
        )
    elif toolkit.get("runtime") or toolkit.get("cdi_specs") or toolkit.get("cli_version"):
        parts = []
        if toolkit.get("cli_version"):
            parts.append(f"nvidia-container-cli {toolkit['cli_version']}")
        if toolkit.get("runtime"):
            parts.append("Docker runtime 'nvidia'")
        if toolkit.get("cdi_specs"):
            parts.append("CDI " + ", ".join(toolkit["cdi_specs"]))
        results.append(result("container_toolkit", host, "nvidia runtime", PASS, "; ".join(parts)))
    else:
        results.append(
            result(
                "container_toolkit",
                host,
                "nvidia runtime",
                FAIL,
                "no NVIDIA Container Toolkit: no nvidia-container-cli, no 'nvidia' Docker runtime, no CDI "
                "spec",
                "install it with playbooks/hosts.yml (nvidia_container_toolkit role), then restart Docker",
            )
        )
    return results


_GEFORCE = re.compile(r"GeForce|RTX \d{4}(?! Ada| PRO)|TITAN", re.IGNORECASE)


def check_gpu_state(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """NVML mismatch / driver state, persistence mode, ECC and MIG."""
    host, gpu = rec["host"], rec.get("gpu")
    if not rec.get("gpu_node"):
        return []
    if not gpu:
        return [
            result(
                "gpu_state", host, "nvidia-smi", SKIP, "no GPU facts", "run the doctor without --tags/--limit"
            )
        ]
    if gpu.get("nvml_mismatch"):
        return [
            result(
                "nvml_mismatch",
                host,
                "driver",
                FAIL,
                f"kernel module {gpu.get('kernel_module_version') or '?'} != NVML library "
                f"{gpu.get('nvml_library_version') or '?'}: "
                f"{gpu.get('error') or 'Driver/library version mismatch'}",
                "reboot the host to load the upgraded driver (drain it first: playbooks/upgrade.yml), then "
                "keep the "
                "driver packages on hold (nvidia_driver role) so unattended upgrades cannot do it again",
            )
        ]
    results = [
        result("nvml_mismatch", host, "driver", PASS, f"driver {gpu.get('driver_version')}, NVML matches")
    ]
    if not gpu.get("present"):
        results.append(
            result(
                "gpu_state",
                host,
                "nvidia-smi",
                FAIL,
                f"no usable GPU (state {gpu.get('state')}): {gpu.get('error') or ''}".rstrip(": "),
                "install/load the driver with playbooks/hosts.yml, or take the host out of gpu_nodes",
            )
        )
        return results
    gpus = gpu.get("gpus") or []
    off = [g for g in gpus if g.get("persistence_mode") is False]
    if off:
        results.append(
            result(
                "persistence_mode",
                host,
                "GPUs " + ",".join(str(g.get("index")) for g in off),
                WARN,
                "persistence mode is off: the driver is torn down between users, adding seconds to every "
                "start "
                "and losing clocks/ECC settings",
                "enable nvidia-persistenced (systemctl enable --now nvidia-persistenced) or nvidia-smi -pm 1",
            )
        )
    else:
        results.append(result("persistence_mode", host, f"{len(gpus)} GPUs", PASS, "enabled"))
    # ECC
    ecc = {e.get("index"): e for e in ((rec.get("probe") or {}).get("ecc") or [])}
    ecc_problems, ecc_notes = [], []
    for g in gpus:
        e = ecc.get(g.get("index")) or {}
        label = f"GPU {g.get('index')}"
        if e.get("volatile_uncorrectable"):
            ecc_problems.append(
                (
                    FAIL,
                    f"{label}: {e['volatile_uncorrectable']} uncorrectable ECC errors since boot",
                    "drain the node, check `nvidia-smi -q -d ECC,ROW_REMAPPER`, reset the GPU "
                    "(nvidia-smi -r) or replace it",
                )
            )
        if e.get("remap_failure"):
            ecc_problems.append((FAIL, f"{label}: row remapping failed", "replace the GPU (RMA)"))
        elif e.get("remap_pending") or e.get("retired_pending"):
            ecc_problems.append(
                (
                    WARN,
                    f"{label}: memory rows/pages wait for a GPU reset to be retired",
                    "drain the node and reset the GPU (nvidia-smi -r) or reboot",
                )
            )
        if e.get("ecc_current") and e.get("ecc_pending") and e["ecc_current"] != e["ecc_pending"]:
            ecc_problems.append(
                (
                    WARN,
                    f"{label}: ECC {e['ecc_current']} now, {e['ecc_pending']} after reboot",
                    "reboot (drained) to apply the pending ECC mode",
                )
            )
        elif e.get("ecc_current") == "Disabled":
            if _GEFORCE.search(g.get("name") or ""):
                ecc_notes.append(f"{label} has no ECC (consumer GPU)")
            else:
                ecc_problems.append(
                    (WARN, f"{label}: ECC disabled", "enable it: nvidia-smi -e 1, then reboot")
                )
    if ecc_problems:
        worst = FAIL if any(s == FAIL for s, _, _ in ecc_problems) else WARN
        results.append(
            result(
                "ecc",
                host,
                f"{len(gpus)} GPUs",
                worst,
                "; ".join(d for _, d, _ in ecc_problems),
                "; ".join(dict.fromkeys(f for _, _, f in ecc_problems)),
            )
        )
    elif ecc:
        results.append(
            result("ecc", host, f"{len(gpus)} GPUs", PASS, "; ".join(ecc_notes) or "enabled, no errors")
        )
    else:
        results.append(
            result("ecc", host, f"{len(gpus)} GPUs", SKIP, "nvidia-smi -q reported no ECC section")
        )
    # MIG
    mig_on = [g for g in gpus if str(g.get("mig_mode") or "").lower() == "enabled"]
    pending = [
        g for g in gpus if g.get("mig_mode_pending") and g.get("mig_mode_pending") != g.get("mig_mode")
    ]
    if mig_on:
        status = WARN if settings.get("allow_mig") else FAIL
        results.append(
            result(
                "mig",
                host,
                "GPUs " + ",".join(str(g.get("index")) for g in mig_on),
                status,
                "MIG mode is enabled: vLLM sees MIG instances, not the whole GPU, and the plan leaves these "
                "GPUs out",
                "disable it (nvidia-smi -i N -mig 0, then reset the GPU) or set fleet_doctor_allow_mig: "
                "true when "
                "the instances are intended",
            )
        )
    elif pending:
        results.append(
            result(
                "mig",
                host,
                "GPUs " + ",".join(str(g.get("index")) for g in pending),
                WARN,
                "a MIG mode change waits for a GPU reset",
                "reset the GPUs (nvidia-smi -r) or reboot, drained",
            )
        )
    else:
        results.append(result("mig", host, f"{len(gpus)} GPUs", PASS, "MIG disabled"))
    return results


def check_topology(rec: Mapping[str, Any], planner: Planner | None) -> list[dict[str, Any]]:
    host, gpu = rec["host"], rec.get("gpu") or {}
    if not rec.get("gpu_node") or not gpu.get("present"):
        return []
    links = (gpu.get("topology") or {}).get("links") or []
    indexes = [g.get("index") for g in gpu.get("gpus") or []]
    results = []
    for model in rec.get("served") or []:
        name = model.get("name")
        plan, source = _plan_for(rec, model, planner)
        if not plan or plan.get("error"):
            why = (plan or {}).get("error") or "no config.json in its path and no recorded plan"
            results.append(
                result(
                    "topology_tp",
                    host,
                    f"model {name}",
                    SKIP,
                    f"tensor parallel size unknown: {why}",
                    "run playbooks/weights.yml so config.json is on the host",
                )
            )
            continue
        tp = int(plan.get("tensor_parallel_size") or 1)
        if tp <= 1:
            results.append(
                result("topology_tp", host, f"model {name}", PASS, f"TP 1 ({source}): no GPU-to-GPU traffic")
            )
            continue
        chosen = [int(i) for i in model.get("gpus") or []] or indexes[:tp]
        pairs = [
            link
            for link in links
            if set(link.get("gpus") or []) <= set(chosen) and len(set(link.get("gpus") or [])) == 2
        ]
        pcie = [p for p in pairs if p.get("kind") == "pcie"]
        unknown = len(pairs) < tp * (tp - 1) // 2
        gpus_text = ",".join(map(str, chosen))
        if pcie:
            paths = sorted({p.get("path") or "PCIe" for p in pcie})
            geforce = any(_GEFORCE.search(g.get("name") or "") for g in gpu.get("gpus") or [])
            results.append(
                result(
                    "topology_tp",
                    host,
                    f"model {name}",
                    WARN,
                    f"TP {tp} ({source}) on GPUs {gpus_text} crosses PCIe ({', '.join(paths)}) without NVLink"
                    + (
                        "; GeForce cards have no peer-to-peer, so every all-reduce goes through host memory"
                        if geforce
                        else "; peer-to-peer over PCIe is not guaranteed (none across CPU sockets: SYS)"
                    ),
                    "expect lower throughput: prefer GPUs under one PCIe switch "
                    "(vllm_server_models[].gpus), a smaller "
                    "TP with a quantized checkpoint, or pipeline_parallel_size in overrides",
                )
            )
        elif unknown:
            results.append(
                result(
                    "topology_tp",
                    host,
                    f"model {name}",
                    SKIP,
                    f"TP {tp} on GPUs {gpus_text}: the GPU links are unknown (no `nvidia-smi topo -m`)",
                )
            )
        else:
            kinds = sorted({p.get("kind") for p in pairs})
            results.append(
                result(
                    "topology_tp",
                    host,
                    f"model {name}",
                    PASS,
                    f"TP {tp} ({source}) on GPUs {gpus_text} over {'/'.join(kinds)}",
                )
            )
    return results


def check_time(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    host, probe = rec["host"], rec.get("probe") or {}
    clock = probe.get("time") or {}
    results = []
    now, sent = clock.get("epoch"), clock.get("controller_time")
    received = rec.get("received_time")
    limit = float(settings["max_clock_skew_s"])
    if now is not None and sent not in (None, ""):
        # The host read its clock between the control node sending the probe and receiving the answer:
        # a correct clock lies inside that window, so only the distance outside it is skew.
        now, sent = float(now), float(sent)
        late = float(received) if received not in (None, "") else sent
        skew = now - sent if now < sent else (now - late if now > late else 0.0)
        window = f" (the probe's round trip: {late - sent:.1f} s)" if late > sent else ""
        detail = f"{skew:+.1f} s against the control node{window}"
        if abs(skew) <= limit:
            results.append(result("clock_skew", host, "clock", PASS, detail))
        else:
            results.append(
                result(
                    "clock_skew",
                    host,
                    "clock",
                    FAIL,
                    detail
                    + f", more than {limit:g} s: TLS, tokens, logs and metrics break with skewed clocks",
                    "sync the clock (chrony or systemd-timesyncd) on this host and on the control node",
                )
            )
    if clock.get("container"):
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                SKIP,
                "runs in a container: its clock is the host kernel's; check time sync on the container host",
            )
        )
        return results
    chrony = clock.get("chrony") or {}
    synced = clock.get("ntp_synchronized")
    if chrony.get("leap_status"):
        ok = chrony["leap_status"] == "Normal"
        detail = f"chrony: leap status {chrony['leap_status']}, reference {chrony.get('reference') or '?'}"
        if chrony.get("offset_s") is not None:
            detail += f", offset {chrony['offset_s'] * 1000:+.1f} ms"
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                PASS if ok else FAIL,
                detail,
                "" if ok else "check `chronyc sources -v`: are the NTP servers reachable (UDP 123)?",
            )
        )
    elif synced is True:
        results.append(
            result(
                "time_sync", host, "NTP", PASS, f"synchronized ({clock.get('ntp_service') or 'timedatectl'})"
            )
        )
    elif synced is False:
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                FAIL,
                "the system clock is not NTP-synchronized",
                "install and enable chrony (or systemd-timesyncd: timedatectl set-ntp true)",
            )
        )
    else:
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                WARN,
                "neither timedatectl nor chronyc answered",
                "install chrony and check `chronyc tracking`",
            )
        )
    return results


def evaluate(
    records: Iterable[Mapping[str, Any]],
    settings: Mapping[str, Any] | None = None,
    hub: list[dict[str, Any]] | None = None,
    planner: Planner | None = None,
    cuda_check: Callable[..., Any] | None = None,
) -> list[dict[str, Any]]:
    """Every check over every host record, then the hub results.

    A record's own ``settings`` (the host's fleet_doctor_* variables) win over ``settings``.
    """
    out: list[dict[str, Any]] = []
    for rec in records:
        merged = {**DEFAULT_SETTINGS, **(settings or {}), **(rec.get("settings") or {})}
        if not rec.get("probe"):
            out.append(
                result(
                    "probe",
                    rec.get("host", "?"),
                    "host",
                    FAIL,
                    "the probe did not run (host unreachable or the module failed)",
                    "fix the connection to the host, then run the doctor again",
                )
            )
            continue
        if (rec.get("probe") or {}).get("errors"):
            for err in rec["probe"]["errors"]:
                out.append(result("probe", rec["host"], "probe", WARN, err))
        out += check_gpu_state(rec, merged)
        out += check_cuda(rec, merged, cuda_check)
        out += check_topology(rec, planner)
        out += check_disk(rec, merged)
        out += check_ram(rec, merged, planner)
        out += check_shm(rec, merged)
        out += check_ports(rec, merged)
        out += check_time(rec, merged)
    out += hub or []
    return out


def summary(results: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    counts = {PASS: 0, WARN: 0, FAIL: 0, SKIP: 0}
    for r in results:
        counts[r["status"]] += 1
    return {**counts, "ok": counts[FAIL] == 0}


def render(results: list[Mapping[str, Any]]) -> str:
    """The table a person reads: one line per check, the fix under every failure and warning."""
    rows = sorted(results, key=lambda r: (r["host"], ORDER[r["status"]], r["check"]))
    headers = ["STATUS", "HOST", "CHECK", "SUBJECT", "DETAIL"]
    table = render_table(
        headers, [[r["status"].upper(), r["host"], r["check"], r["subject"], r["detail"]] for r in rows]
    )
    lines = table.splitlines()
    out = lines[:2]
    for row, line in zip(rows, lines[2:], strict=True):
        out.append(line)
        if row["fix"] and row["status"] in (FAIL, WARN):
            out.append(f"      fix: {row['fix']}")
    s = summary(results)
    out.append("")
    out.append(f"{s[FAIL]} failed, {s[WARN]} warnings, {s[PASS]} passed, {s[SKIP]} skipped")
    return "\n".join(out)


def targets(host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """What to probe on one host and the skeleton of its record, from the host's variables.

    ``host_vars``: ``host``, ``gpu_node``, ``writer``, ``storage_root``, ``served``
    (vllm_server_models), ``weights_models`` (model_weights_models), ``extra_ports``,
    ``gateway`` (``{http_port, https_port, tls}`` on gateways, else None), ``image``,
    ``image_cuda``, ``gpu_requests``, ``plan_options``, ``vllm_version``.
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
    model_dirs += [{"name": m.get("name"), "path": m.get("path")} for m in served if m.get("path")]
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


def hub_requests(records: Iterable[Mapping[str, Any]], endpoint: str) -> list[dict[str, Any]]:
    """One access check per hub model stored by a writer host: the URL to HEAD and from which host."""
    out = []
    for rec in records:
        for model in rec.get("stored") or []:
            if model.get("source") not in ("huggingface", "hf"):
                continue
            base = (model.get("endpoint") or endpoint or "https://huggingface.co").rstrip("/")
            out.append(
                {
                    "name": model["name"],
                    "repo_id": model["repo_id"],
                    "revision": model["revision"],
                    "endpoint": base,
                    "host": rec["host"],
                    "url": f"{base}/{model['repo_id']}/resolve/{model['revision']}/config.json",
                }
            )
    return out
