"""MIG GPU instances as planner GPUs: which instances a model is served on, and each one's GPU spec.

A MIG GPU instance is a GPU of its own to vLLM: its memory (shared by its compute instances,
counted once), the SMs of the compute instance the server runs on, and no peer access to any
other instance, so tensor parallelism stops at one instance (TP 1, one vLLM per instance).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import PlanInputError

# GPU-instance profile names as nvidia-smi -L prints them: 1g.10gb, 3g.71gb, 1g.12gb+me, 7g.80gb.
PROFILE_RE = re.compile(r"^\d+g\.\d+gb(\+[a-z]+)?$")
# MIG device UUIDs: MIG-<uuid> (driver R470 onwards), MIG-GPU-<uuid>/<gi>/<ci> (older drivers).
UUID_RE = re.compile(r"^MIG-[0-9A-Fa-f-]+(/\d+/\d+)?$|^MIG-GPU-[0-9A-Fa-f-]+/\d+/\d+$")
VAR = "vllm_server_models[].mig"


def _is_mig(gpu: Mapping[str, Any]) -> bool:
    return str(gpu.get("mig_mode") or "").strip().lower() in ("enabled", "true", "1")


def _server_device(
    instance: Mapping[str, Any], gpu: Mapping[str, Any]
) -> tuple[int | None, str | None, int | None]:
    """The compute instance a server of this GPU instance runs on: the one with the most SMs.

    Returns its MIG device index, UUID and SM count. vLLM uses one CUDA device; the GI's other compute
    instances stay idle (their memory is the same GI memory, so a second server there would share it).
    """
    devices = {d.get("index"): d for d in gpu.get("mig_devices") or [] if isinstance(d, Mapping)}
    best: tuple[int | None, str | None, int | None] = (None, None, None)
    uuids = list(instance.get("uuids") or [])
    for pos, index in enumerate(instance.get("devices") or []):
        dev = devices.get(index, {})
        uuid = dev.get("uuid") or (uuids[pos] if pos < len(uuids) else None)
        sms = dev.get("multiprocessor_count")
        if best[0] is None or (sms or 0) > (best[2] or 0):
            best = (index, uuid, sms)
    return best


def mig_targets(facts: Mapping[str, Any], selection: Any, gpus: Any = None) -> list[dict[str, Any]]:
    """The MIG GPU instances a model is served on, one server each, in GPU then instance order.

    ``selection`` is ``vllm_server_models[].mig``: ``all`` (every GPU instance of the host's MIG GPUs)
    or a list of GPU-instance profiles (``3g.71gb``: every instance of that profile) and MIG UUIDs
    (that instance; a UUID of any of its compute instances names it). ``gpus`` (the model's GPU
    indexes) narrows the choice to those GPUs. Each target: ``gpu`` (parent index), ``gpu_name``,
    ``compute_capability``, ``gpu_instance_id``, ``profile``, ``memory_total_mib`` (the GI's, once),
    ``multiprocessor_count`` (SMs of the compute instance served on), ``mig_device`` and ``uuid``
    of that compute instance, ``label`` (``gpu0-gi2``: stable, for container names).
    """
    if not isinstance(facts, Mapping):
        raise PlanInputError(f"{VAR}: expected the nvidia_gpu facts mapping, got {type(facts).__name__}")
    entries = [g for g in facts.get("gpus") or [] if isinstance(g, Mapping)]
    if gpus not in (None, "", []):
        if not isinstance(gpus, list | tuple):
            raise PlanInputError(f"vllm_server_models[].gpus: expected a list of GPU indexes, got {gpus!r}")
        entries = [g for g in entries if g.get("index") in set(gpus)]
    mig_gpus = [g for g in entries if _is_mig(g)]
    pool: list[dict[str, Any]] = []
    for gpu in mig_gpus:
        for inst in gpu.get("mig_instances") or []:
            device, uuid, sms = _server_device(inst, gpu)
            pool.append(
                {
                    "gpu": gpu.get("index"),
                    "gpu_name": str(gpu.get("name") or "unknown"),
                    "compute_capability": gpu.get("compute_capability"),
                    "gpu_instance_id": inst.get("gpu_instance_id"),
                    "profile": inst.get("profile") or "unknown",
                    "memory_total_mib": inst.get("memory_total_mib"),
                    "multiprocessor_count": sms,
                    "mig_device": device,
                    "uuid": uuid,
                    "uuids": list(inst.get("uuids") or []),
                    "label": f"gpu{gpu.get('index')}-gi{inst.get('gpu_instance_id', device)}",
                }
            )
    where = "this host"
    if gpus not in (None, "", []):
        where = "GPUs " + ",".join(str(g.get("index")) for g in entries)
    if not pool:
        raise PlanInputError(
            f"{VAR}: {where} has no MIG GPU instance (MIG mode is off or no instance is created). Fix: "
            "create instances (nvidia-smi mig -cgi 3g.40gb -C) or drop mig from the model to serve whole GPUs"
        )
    if selection == "all":
        return pool
    if isinstance(selection, str) or not isinstance(selection, list | tuple) or not selection:
        raise PlanInputError(
            f"{VAR}: expected 'all' or a list of GPU-instance profiles and MIG UUIDs "
            f"(e.g. [3g.71gb] or [MIG-...]), got {selection!r}"
        )
    profiles = sorted({t["profile"] for t in pool})
    chosen: list[dict[str, Any]] = []
    for raw in selection:
        ref = str(raw).strip()
        if UUID_RE.match(ref):
            hits = [t for t in pool if ref in t["uuids"]]
            what = f"MIG UUID {ref}"
        elif PROFILE_RE.match(ref):
            hits = [t for t in pool if t["profile"] == ref]
            what = f"profile {ref}"
        else:
            raise PlanInputError(
                f"{VAR}: {ref!r} is neither a GPU-instance profile (e.g. 3g.71gb; not a compute-instance "
                "name such as 1c.3g.71gb) nor a MIG UUID (MIG-...). Fix: copy one from nvidia-smi -L"
            )
        if not hits:
            raise PlanInputError(
                f"{VAR}: no GPU instance of {what} on {where} (it has {', '.join(profiles)}). "
                "Fix: pick one of those (nvidia-smi -L lists them)"
            )
        for hit in hits:
            if any(c["label"] == hit["label"] for c in chosen):
                raise PlanInputError(
                    f"{VAR}: {what} selects GPU {hit['gpu']} instance {hit['gpu_instance_id']} "
                    f"({hit['profile']}) a second time. Fix: list each instance once"
                )
            chosen.append(hit)
    return sorted(chosen, key=pool.index)


def mig_gpu_spec(target: Mapping[str, Any]) -> dict[str, Any]:
    """The planner's gpu dict for one MIG GPU instance (a target of :func:`mig_targets`).

    One device (no tensor parallelism across instances) of the instance's memory; the plan's
    ``--gpu-memory-utilization`` is then a fraction of that memory, as vLLM measures it on the
    instance's CUDA device. ``mig`` (informational) names the instance in refusals.
    """
    memory = target.get("memory_total_mib")
    if memory in (None, ""):
        raise PlanInputError(
            f"{VAR}: GPU {target.get('gpu')} instance {target.get('gpu_instance_id')} "
            f"({target.get('profile')}) has no memory in the facts. Fix: re-read the GPU facts "
            "(nvidia-smi -q)"
        )
    return {
        "name": f"{target.get('gpu_name')} MIG {target.get('profile')}",
        "memory_mib": int(memory),
        "count": 1,
        "compute_capability": str(target.get("compute_capability") or "8.0"),
        "nodes": 1,
        "shared": False,
        "mig": {
            "profile": target.get("profile"),
            "gpu": target.get("gpu"),
            "gpu_instance_id": target.get("gpu_instance_id"),
            "uuid": target.get("uuid"),
            "multiprocessor_count": target.get("multiprocessor_count"),
        },
    }


def _without_gpu_count_fixes(error: str) -> str:
    """A planner error less the fixes that add GPUs or nodes: a MIG server has exactly one instance."""
    head, sep, fixes = error.rpartition(" Fix: ")
    if not sep:
        return error
    kept = [
        alt.strip().rstrip(".")
        for alt in fixes.split("; or ")
        if "tensor_parallel_size" not in alt and "pipeline_parallel_size" not in alt and "nodes" not in alt
    ]
    return f"{head} Fix: {'; or '.join(kept)}." if kept else head


def mig_refusal(target: Mapping[str, Any], model: str, errors: Any) -> str:
    """One line: why ``model`` cannot be served on this instance, and the fix."""
    items = errors if isinstance(errors, list | tuple) else [errors or ""]
    text = " ".join(_without_gpu_count_fixes(str(e)) for e in items)
    gib = int(target.get("memory_total_mib") or 0) / 1024
    return (
        f"{model} does not fit MIG {target.get('profile')} (GPU {target.get('gpu')} instance "
        f"{target.get('gpu_instance_id')}, {gib:.1f} GiB): {text} Or serve it on larger instances "
        f"(vllm_server_models[{model}].mig: [<larger profile>]) or on whole GPUs (drop mig)."
    )
