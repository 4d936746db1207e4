"""GPU checks: driver/NVML mismatch, persistence mode, ECC, MIG, driver vs image CUDA, container
toolkit, and GPU topology against the tensor parallel size."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .containers import vllm_containers
from .plans import Planner, plan_for
from .results import FAIL, PASS, SKIP, WARN, result

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
        worst = FAIL if any(s == FAIL for s, _unused, _unused in ecc_problems) else WARN
        results.append(
            result(
                "ecc",
                host,
                f"{len(gpus)} GPUs",
                worst,
                "; ".join(d for _unused, d, _unused in ecc_problems),
                "; ".join(dict.fromkeys(f for _unused, _unused, f in ecc_problems)),
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
    for container in vllm_containers(rec, settings):
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


def check_topology(rec: Mapping[str, Any], planner: Planner | None) -> list[dict[str, Any]]:
    host, gpu = rec["host"], rec.get("gpu") or {}
    if not rec.get("gpu_node") or not gpu.get("present"):
        return []
    links = (gpu.get("topology") or {}).get("links") or []
    indexes = [g.get("index") for g in gpu.get("gpus") or []]
    results = []
    for model in rec.get("served") or []:
        name = model.get("name")
        plan, source = plan_for(rec, model, planner)
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
