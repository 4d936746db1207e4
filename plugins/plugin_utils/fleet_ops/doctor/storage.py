"""Storage checks: disk space for the model folders, model sizes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .results import FAIL, GIB, PASS, SKIP, gib, result


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
