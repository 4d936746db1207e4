"""Parsers for what the doctor probe reads on a host (pure functions over text and JSON).

Used by the ``vllm_fleet_doctor_probe`` module on the host and by unit tests; standard
library only. Runs on managed hosts too: no syntax newer than Python 3.9 outside annotations.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp


def parse_proc_net_tcp(text: str) -> list[dict[str, Any]]:
    """Listening sockets of a /proc/net/tcp or /proc/net/tcp6 table: [{address, port, inode}]."""
    sockets = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        address, _sep, port = fields[1].rpartition(":")
        try:
            sockets.append({"address": _hex_address(address), "port": int(port, 16), "inode": int(fields[9])})
        except ValueError:
            continue
    return sockets


def _hex_address(text: str) -> str:
    """Dotted/colon form of a /proc/net address (little-endian 32-bit words)."""
    if len(text) == 8:
        return ".".join(str(int(text[i : i + 2], 16)) for i in (6, 4, 2, 0))
    words = [text[i : i + 8] for i in range(0, len(text), 8)]
    raw = "".join("".join(w[j : j + 2] for j in (6, 4, 2, 0)) for w in words).lower()
    groups = [raw[i : i + 4].lstrip("0") or "0" for i in range(0, len(raw), 4)]
    if groups[:5] == ["0"] * 5 and groups[5] == "ffff":
        tail = raw[24:]
        return ".".join(str(int(tail[i : i + 2], 16)) for i in range(0, 8, 2))
    if all(g == "0" for g in groups):
        return "::"
    return ":".join(groups)


def parse_meminfo(text: str) -> dict[str, int | None]:
    """MemTotal and MemAvailable of /proc/meminfo, in bytes."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    return {"mem_total_bytes": values.get("MemTotal"), "mem_available_bytes": values.get("MemAvailable")}


def _count(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isdigit() else None


def _yes(value: str) -> bool | None:
    return {"yes": True, "no": False}.get(value.strip().lower())


def parse_ecc(text: str) -> list[dict[str, Any]]:
    """ECC state per GPU from ``nvidia-smi -q`` text.

    Per GPU (in order): ``ecc_current``/``ecc_pending`` (Enabled, Disabled or None when
    not reported), ``volatile_uncorrectable`` (sum of every "Uncorr..." counter under
    ECC Errors / Volatile, None when not reported), ``remap_pending`` and
    ``remap_failure`` (row remapper; None when not reported), ``retired_pending``
    (page retirement, older GPUs).
    """
    gpus: list[dict[str, Any]] = []
    section: list[str] = []
    gpu: dict[str, Any] | None = None
    for raw in text.splitlines():
        if re.match(r"^GPU [0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*$", raw):
            gpu = {
                "index": len(gpus),
                "ecc_current": None,
                "ecc_pending": None,
                "volatile_uncorrectable": None,
                "remap_pending": None,
                "remap_failure": None,
                "retired_pending": None,
            }
            gpus.append(gpu)
            section = []
            continue
        if gpu is None or not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        level = indent // 4
        key, sep, value = raw.strip().partition(":")
        key = key.strip()
        section = section[: max(level - 1, 0)]
        if not sep or not value.strip():
            section.append(key)
            continue
        value = value.strip()
        path = section + [key]
        if path[:1] == ["ECC Mode"] and key in ("Current", "Pending"):
            state = value if value in ("Enabled", "Disabled") else None
            gpu["ecc_current" if key == "Current" else "ecc_pending"] = state
        elif path[:2] == ["ECC Errors", "Volatile"] and (
            "uncorr" in key.lower() or (path[2:3] == ["Double Bit"] and key == "Total")
        ):
            number = _count(value)
            if number is not None:
                gpu["volatile_uncorrectable"] = (gpu["volatile_uncorrectable"] or 0) + number
        elif path[:1] == ["Remapped Rows"] and key == "Pending":
            gpu["remap_pending"] = _yes(value)
        elif path[:1] == ["Remapped Rows"] and key == "Remapping Failure Occurred":
            gpu["remap_failure"] = _yes(value)
        elif path[:1] == ["Retired Pages"] and key == "Pending Page Blacklist":
            gpu["retired_pending"] = _yes(value)
        elif path[:1] == ["Retired Pages"] and key == "Pending" and len(path) == 2:
            gpu["retired_pending"] = _yes(value)
    return gpus


def parse_key_values(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``timedatectl show``)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def parse_chronyc_tracking(text: str) -> dict[str, Any]:
    """Leap status, reference and the system clock offset (seconds) of ``chronyc tracking``."""
    out: dict[str, Any] = {"leap_status": None, "reference": None, "offset_s": None}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Leap status":
            out["leap_status"] = value
        elif key == "Reference ID":
            out["reference"] = value
        elif key == "System time":
            match = re.match(r"^([\d.]+) seconds (fast|slow)", value)
            if match:
                offset = float(match.group(1))
                out["offset_s"] = offset if match.group(2) == "fast" else -offset
    return out


def port_from_args(args: list[str]) -> int | None:
    """The ``--port`` of a ``vllm serve`` command line (8000, vLLM's default, when absent)."""
    for pos, arg in enumerate(args):
        if arg == "--port" and pos + 1 < len(args) and args[pos + 1].isdigit():
            return int(args[pos + 1])
        if arg.startswith("--port="):
            value = arg.split("=", 1)[1]
            return int(value) if value.isdigit() else None
    return 8000


def container_summary(inspect: dict[str, Any]) -> dict[str, Any]:
    """The parts of ``docker inspect`` the doctor looks at."""
    config = inspect.get("Config") or {}
    host = inspect.get("HostConfig") or {}
    entry = config.get("Entrypoint") or []
    cmd = config.get("Cmd") or []
    if isinstance(entry, str):
        entry = shlex.split(entry)
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    args = list(entry) + list(cmd)
    return {
        "id": (inspect.get("Id") or "")[:12],
        "name": (inspect.get("Name") or "").lstrip("/"),
        "image": config.get("Image"),
        "image_id": inspect.get("Image"),
        "labels": config.get("Labels") or {},
        "running": bool((inspect.get("State") or {}).get("Running")),
        "ipc_mode": host.get("IpcMode") or "",
        "shm_size": host.get("ShmSize"),
        "network_mode": host.get("NetworkMode") or "",
        "args": args,
        "port": port_from_args(args) if "vllm serve" in " ".join(args) else None,
    }


# Inside a vLLM container: the size of the /dev/shm its workers get (python3 is in every vLLM image).
def parse_shm_size(output: bytes | str) -> int | None:
    """The /dev/shm size in bytes that the fleet_doctor probe's statvfs command printed inside a container,
    or None when it printed anything else (an error)."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return int(lines[-1]) if len(lines) == 1 and lines[-1].isdigit() else None


def looks_like_vllm(container: dict[str, Any], label_prefix: str = "io.vllm-fleet") -> bool:
    """A vLLM server container: labelled by the vllm_server role, or running ``vllm serve``."""
    labels = container.get("labels") or {}
    if labels.get(label_prefix + ".role") == "vllm_server":
        return True
    args = " ".join(container.get("args") or [])
    return "vllm serve" in args or "vllm.entrypoints" in args
