"""Parse ``nvidia-smi`` output into GPU facts.

Pure standard library, importable both as ``ansible.module_utils.nvidia_smi``
(from the ``nvidia_gpu_facts`` module) and as ``nvidia_smi`` (unit tests).

Supported inputs:

* ``nvidia-smi -q`` (text; also what ``-a`` prints): the primary source.
* ``nvidia-smi -q -x`` (XML): same facts as the text form.
* ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``:
  compute capability where the driver reports it.
* ``nvidia-smi topo -m``: link type between every GPU pair, CPU/NUMA affinity.
* ``nvidia-smi nvlink -s``: active NVLink links per GPU.
* ``nvidia-smi -L``: GPU and MIG device list.
* The failure messages NVIDIA's tools print (driver/library version mismatch,
  no devices, driver not loaded).

``build_facts`` combines the outputs into the dictionary returned as
``ansible_facts.nvidia_gpu``; ``facts_from_results`` does the same from raw
command results and is what the module calls.
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from typing import Any

# --- the invocations the facts module makes ---------------------------------

QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "memory.free",
    "compute_cap",
    "driver_version",
    "persistence_mode",
    "mig.mode.current",
    "power.limit",
    "clocks.max.sm",
)
QUERY_ARGS: tuple[str, ...] = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
# Drivers before 510 refuse the whole query for the one field they lack (compute_cap).
QUERY_FIELDS_LEGACY: tuple[str, ...] = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
QUERY_ARGS_LEGACY: tuple[str, ...] = (
    "--query-gpu=" + ",".join(QUERY_FIELDS_LEGACY),
    "--format=csv,noheader,nounits",
)
TABLE_ARGS: tuple[str, ...] = ()
LIST_ARGS: tuple[str, ...] = ("-L",)
DETAIL_ARGS: tuple[str, ...] = ("-q",)
XML_ARGS: tuple[str, ...] = ("-q", "-x")
TOPO_ARGS: tuple[str, ...] = ("topo", "-m")
NVLINK_ARGS: tuple[str, ...] = ("nvlink", "-s")

# Error states reported in ``state``.
STATE_OK = "ok"
STATE_NO_DRIVER = "no_driver"  # nvidia-smi is not installed
STATE_NO_DEVICES = "no_devices"  # driver loaded, no GPU visible
STATE_NVML_MISMATCH = "nvml_mismatch"  # kernel module and userspace library differ
STATE_DRIVER_NOT_LOADED = "driver_not_loaded"  # nvidia-smi present, kernel module absent
STATE_NVML_MISSING = "nvml_missing"  # libnvidia-ml.so cannot be loaded
STATE_TIMEOUT = "timeout"
STATE_ERROR = "error"

_NA_VALUES = frozenset(
    {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "unknown error", "none"}
)

# --- product name -> compute capability ------------------------------------
#
# Used when nvidia-smi does not report ``compute_cap`` (drivers before 510, or
# a query that failed). First match wins, so specific names come before
# generic ones. Columns: name pattern, compute capability, architecture,
# NVLink (True: links between boards, False: none, None: optional bridge),
# NVLink links per GPU on SXM/OAM boards (used to tell NVSwitch from direct
# links when ``nvidia-smi nvlink -s`` gave no count).
# Sources: NVIDIA's CUDA GPU compute capability list and product data sheets.
PRODUCT_TABLE: tuple[tuple[str, str, str, bool | None, int | None], ...] = (
    # Blackwell
    (r"\bGB300\b|\bB300\b", "10.3", "Blackwell", True, 18),
    (r"\bGB200\b|\bB200\b|\bB100\b", "10.0", "Blackwell", True, 18),
    (r"\bGB10\b", "12.1", "Blackwell", False, None),
    (r"RTX PRO \d+ Blackwell|GeForce RTX 50\d0", "12.0", "Blackwell", False, None),
    # Hopper
    (r"\bGH200\b", "9.0", "Hopper", True, 18),
    (r"\bH200 NVL\b|\bH100 NVL\b|\bH100 PCIe\b", "9.0", "Hopper", None, None),
    (r"\bH200\b|\bH100\b|\bH20\b", "9.0", "Hopper", True, 18),
    (r"\bH800\b", "9.0", "Hopper", True, 8),
    # Ada Lovelace
    (r"\bL40S?\b|\bL4\b|\bL20\b|\bL2\b|RTX \d+ Ada|GeForce RTX 40\d0", "8.9", "Ada Lovelace", False, None),
    # Ampere
    (r"\bA100[- ]SXM|\bA100-SXM4|\bA800[- ]SXM", "8.0", "Ampere", True, 12),
    (r"\bA100\b|\bA800\b|\bA30\b", "8.0", "Ampere", None, None),
    (r"\bA40\b|RTX A6000|RTX A5500|RTX A5000|GeForce RTX 3090", "8.6", "Ampere", None, None),
    (r"\bA10G?\b|\bA16\b|\bA2\b|RTX A\d+|GeForce RTX 30\d0", "8.6", "Ampere", False, None),
    # Turing
    (r"Quadro RTX [68]000|TITAN RTX|GeForce RTX 20[78]0", "7.5", "Turing", None, None),
    (r"\bT4\b|Quadro RTX \d+|GeForce RTX 20\d0|GeForce GTX 16\d0|\bT\d{3,4}\b", "7.5", "Turing", False, None),
    # Volta / Pascal
    (r"V100-SXM|V100 SXM", "7.0", "Volta", True, 6),
    (r"\bV100\b|TITAN V\b|Quadro GV100", "7.0", "Volta", None, None),
    (r"\bP100\b", "6.0", "Pascal", None, None),
    (r"\bP40\b|\bP4\b|\bP6\b|GeForce GTX 10\d0|Quadro P\d+", "6.1", "Pascal", False, None),
    # Kepler (drivers up to 470 only)
    (r"\bK80\b", "3.7", "Kepler", False, None),
)
_PRODUCT_RES = tuple((re.compile(p), cc, arch, nv, links) for p, cc, arch, nv, links in PRODUCT_TABLE)


def product_info(name: str | None) -> dict[str, Any] | None:
    """Compute capability, architecture and NVLink facts for a product name, or None."""
    if not name:
        return None
    for pattern, cc, arch, nvlink, links in _PRODUCT_RES:
        if pattern.search(name):
            return {"compute_capability": cc, "architecture": arch, "nvlink": nvlink, "sxm_nvlinks": links}
    return None


# --- small helpers -----------------------------------------------------------


def _na(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value.lower() in _NA_VALUES else value


def _mib(value: str | None) -> int | None:
    """'143771 MiB' / '143771' -> 143771."""
    value = _na(value)
    if value is None:
        return None
    match = re.match(r"^(\d+)(?:\s*MiB)?$", value)
    return int(match.group(1)) if match else None


def _enabled(value: str | None) -> bool | None:
    value = _na(value)
    if value is None:
        return None
    low = value.lower()
    if low in ("enabled", "on", "yes"):
        return True
    if low in ("disabled", "off", "no"):
        return False
    return None


def _mode(value: str | None) -> str | None:
    """MIG mode as 'enabled' / 'disabled', None where unsupported."""
    flag = _enabled(value)
    if flag is None:
        return None
    return "enabled" if flag else "disabled"


def normalize_bus_id(bus_id: str | None) -> str | None:
    """'00000000:07:00.0' / '0000:07:00.0' -> '00000000:07:00.0' (nvidia-smi's form)."""
    bus_id = _na(bus_id)
    if bus_id is None:
        return None
    match = re.match(r"^([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])$", bus_id)
    if not match:
        return bus_id.upper()
    domain, bus, dev, fn = match.groups()
    return f"{int(domain, 16):08X}:{bus.upper()}:{dev.upper()}.{fn}"


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


# --- failure messages --------------------------------------------------------


def classify_failure(output: str, rc: int | None = None) -> dict[str, Any] | None:
    """Recognise the errors nvidia-smi prints instead of data; None when the output is data.

    Returns {'state': ..., 'message': ..., 'nvml_library_version': ...}.
    """
    text = strip_ansi(output or "").strip()
    low = text.lower()
    message = text.splitlines()[0].strip() if text else ""
    result: dict[str, Any] = {"state": None, "message": message, "nvml_library_version": None}
    if "driver/library version mismatch" in low:
        result["state"] = STATE_NVML_MISMATCH
        match = re.search(r"NVML library version:\s*([0-9.]+)", text)
        if match:
            result["nvml_library_version"] = match.group(1)
        result["message"] = " ".join(line.strip() for line in text.splitlines() if line.strip())
    elif "no devices were found" in low or "no supported gpus were found" in low:
        result["state"] = STATE_NO_DEVICES
    elif (
        "couldn't communicate with the nvidia driver" in low
        or "could not communicate with the nvidia driver" in low
    ):
        result["state"] = STATE_DRIVER_NOT_LOADED
        result["message"] = " ".join(line.strip() for line in text.splitlines() if line.strip())
    elif "nvml shared library not found" in low or "couldn't find libnvidia-ml.so" in low or rc == 12:
        result["state"] = STATE_NVML_MISSING
    elif rc not in (None, 0):
        result["state"] = STATE_ERROR
        result["message"] = message or f"nvidia-smi exited {rc} without output"
    else:
        return None
    return result


# --- nvidia-smi -q (text) -----------------------------------------------------

_KV_RE = re.compile(r"^(?P<indent> *)(?P<key>\S.*?)\s*:(?:\s(?P<value>.*))?$")


class _Node:
    """One section of ``nvidia-smi -q``: ordered (key, value-or-section) pairs."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []

    def get(self, *path: str) -> Any:
        node: Any = self
        for key in path:
            if not isinstance(node, _Node):
                return None
            for item_key, item_value in node.items:
                if item_key.strip().lower() == key.lower():
                    node = item_value
                    break
            else:
                return None
        return node

    def value(self, *path: str) -> str | None:
        found = self.get(*path)
        return found if isinstance(found, str) else None

    def all(self, key: str) -> list[Any]:
        return [v for k, v in self.items if k.strip().lower() == key.lower()]


def _parse_tree(lines: list[str]) -> _Node:
    root = _Node()
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for raw in lines:
        line = raw.expandtabs(8).rstrip()
        if not line.strip() or line.strip().startswith("="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        match = _KV_RE.match(line)
        if match:
            parent.items.append((match.group("key").strip(), (match.group("value") or "").strip()))
        else:
            child = _Node()
            parent.items.append((line.strip(), child))
            stack.append((indent, child))
    return root


_GPU_HEADER_RE = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def _blank_gpu(index: int) -> dict[str, Any]:
    """A GPU entry with every key ``parse_query`` fills, all unknown."""
    return {
        "index": index,
        "uuid": None,
        "name": None,
        "architecture": None,
        "pci_bus_id": None,
        "memory_total_mib": None,
        "memory_reserved_mib": None,
        "persistence_mode": None,
        "mig_mode": None,
        "mig_mode_pending": None,
        "mig_devices": [],
        "minor_number": None,
        "fabric_state": None,
        "fabric_clique_id": None,
    }


def parse_query(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi -q`` text: host driver/CUDA versions and one dict per GPU."""
    lines = strip_ansi(text).splitlines()
    header: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in lines:
        match = _GPU_HEADER_RE.match(line.strip()) if not line.startswith(" ") else None
        if match:
            sections.append((match.group(1), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            header.append(line)
    top = _parse_tree(header)
    attached = _na(top.value("Attached GPUs"))
    result: dict[str, Any] = {
        "driver_version": _na(top.value("Driver Version")),
        "cuda_version": _na(top.value("CUDA Version")),
        "attached_gpus": int(attached) if attached and attached.isdigit() else None,
        "gpus": [],
    }
    for index, (bus_id, body) in enumerate(sections):
        node = _parse_tree(body)
        mig_devices = []
        for mig in node.all("MIG Device"):
            if not isinstance(mig, _Node):
                continue
            mem = mig.value("Shared FB Memory Usage", "Total") or mig.value("FB Memory Usage", "Total")
            sm_count = _na(mig.value("Device Attributes", "Shared", "Multiprocessor count"))
            mig_devices.append(
                {
                    "index": _int(mig.value("Index")),
                    "gpu_instance_id": _int(mig.value("GPU Instance ID")),
                    "compute_instance_id": _int(mig.value("Compute Instance ID")),
                    "memory_total_mib": _mib(mem),
                    "multiprocessor_count": int(sm_count) if sm_count and sm_count.isdigit() else None,
                }
            )
        gpu = {
            "index": index,
            "uuid": _na(node.value("GPU UUID")),
            "name": _na(node.value("Product Name")),
            "architecture": _na(node.value("Product Architecture")),
            "pci_bus_id": normalize_bus_id(node.value("PCI", "Bus Id") or bus_id),
            "memory_total_mib": _mib(node.value("FB Memory Usage", "Total")),
            "memory_reserved_mib": _mib(node.value("FB Memory Usage", "Reserved")),
            "persistence_mode": _enabled(node.value("Persistence Mode")),
            "mig_mode": _mode(node.value("MIG Mode", "Current")),
            "mig_mode_pending": _mode(node.value("MIG Mode", "Pending")),
            "mig_devices": mig_devices,
            "minor_number": _int(node.value("Minor Number")),
            "fabric_state": _na(node.value("Fabric", "State")),
            "fabric_clique_id": _na(node.value("Fabric", "CliqueId")),
        }
        result["gpus"].append(gpu)
    return result


def _int(value: str | None) -> int | None:
    value = _na(value)
    if value is None:
        return None
    try:
        return int(value, 0) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return None


# --- nvidia-smi -q -x (XML) ---------------------------------------------------


def _xml_text(elem: ET.Element | None, path: str) -> str | None:
    if elem is None:
        return None
    found = elem.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def parse_query_xml(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi -q -x``; same shape as ``parse_query``."""
    # The DOCTYPE names a DTD file that is never fetched; drop it so no parser resolves it.
    text = re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)
    root = ET.fromstring(text)
    attached = _na(_xml_text(root, "attached_gpus"))
    result: dict[str, Any] = {
        "driver_version": _na(_xml_text(root, "driver_version")),
        "cuda_version": _na(_xml_text(root, "cuda_version")),
        "attached_gpus": int(attached) if attached and attached.isdigit() else None,
        "gpus": [],
    }
    for index, gpu_el in enumerate(root.findall("gpu")):
        mig_devices = []
        for mig in gpu_el.findall("mig_devices/mig_device"):
            mem = _xml_text(mig, "fb_memory_usage/total") or _xml_text(mig, "shared_fb_memory_usage/total")
            sm_count = _na(_xml_text(mig, "device_attributes/shared/multiprocessor_count"))
            mig_devices.append(
                {
                    "index": _int(_xml_text(mig, "index")),
                    "gpu_instance_id": _int(_xml_text(mig, "gpu_instance_id")),
                    "compute_instance_id": _int(_xml_text(mig, "compute_instance_id")),
                    "memory_total_mib": _mib(mem),
                    "multiprocessor_count": int(sm_count) if sm_count and sm_count.isdigit() else None,
                }
            )
        result["gpus"].append(
            {
                "index": index,
                "uuid": _na(_xml_text(gpu_el, "uuid")),
                "name": _na(_xml_text(gpu_el, "product_name")),
                "architecture": _na(_xml_text(gpu_el, "product_architecture")),
                "pci_bus_id": normalize_bus_id(_xml_text(gpu_el, "pci/pci_bus_id") or gpu_el.get("id")),
                "memory_total_mib": _mib(_xml_text(gpu_el, "fb_memory_usage/total")),
                "memory_reserved_mib": _mib(_xml_text(gpu_el, "fb_memory_usage/reserved")),
                "persistence_mode": _enabled(_xml_text(gpu_el, "persistence_mode")),
                "mig_mode": _mode(_xml_text(gpu_el, "mig_mode/current_mig")),
                "mig_mode_pending": _mode(_xml_text(gpu_el, "mig_mode/pending_mig")),
                "mig_devices": mig_devices,
                "minor_number": _int(_xml_text(gpu_el, "minor_number")),
                "fabric_state": _na(_xml_text(gpu_el, "fabric/state")),
                "fabric_clique_id": _na(_xml_text(gpu_el, "fabric/cliqueId")),
            }
        )
    return result


# --- --query-gpu CSV -----------------------------------------------------------


def parse_query_gpu_csv(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[dict[str, str | None]]:
    """Parse ``--format=csv,noheader,nounits`` output into one dict per GPU keyed by field."""
    rows = []
    for row in csv.reader([line for line in text.splitlines() if line.strip()], skipinitialspace=True):
        if len(row) != len(fields):
            raise ValueError(f"expected {len(fields)} fields per line, got {len(row)}: {row!r}")
        rows.append({fields[i]: _na(row[i]) for i in range(len(fields))})
    return rows


def report_from_query_gpu(rows: list[dict[str, str | None]]) -> dict[str, Any]:
    """``parse_query``-shaped report from ``parse_query_gpu_csv`` rows (no CUDA version, no MIG devices)."""
    result: dict[str, Any] = {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": []}
    for pos, row in enumerate(rows):
        index = _int(row.get("index"))
        gpu = _blank_gpu(pos if index is None else index)
        gpu.update(
            {
                "uuid": row.get("uuid"),
                "name": row.get("name"),
                "pci_bus_id": normalize_bus_id(row.get("pci.bus_id")),
                "memory_total_mib": _mib(row.get("memory.total")),
                "persistence_mode": _enabled(row.get("persistence_mode")),
                "mig_mode": _mode(row.get("mig.mode.current")),
            }
        )
        result["gpus"].append(gpu)
        result["driver_version"] = result["driver_version"] or row.get("driver_version")
    return result


def report_from_list(listed: list[dict[str, Any]]) -> dict[str, Any]:
    """``parse_query``-shaped report from ``parse_list_gpus`` (names, UUIDs, MIG devices; no memory)."""
    gpus = []
    for entry in listed:
        gpu = _blank_gpu(entry["index"])
        gpu.update({"uuid": entry["uuid"], "name": entry["name"]})
        if entry["mig"]:
            gpu["mig_mode"] = "enabled"
            gpu["mig_devices"] = [
                {
                    "index": mig["device"],
                    "gpu_instance_id": None,
                    "compute_instance_id": None,
                    "memory_total_mib": None,
                    "multiprocessor_count": None,
                }
                for mig in entry["mig"]
            ]
        gpus.append(gpu)
    return {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": gpus}


# --- topo -m -------------------------------------------------------------------

_TRAILING_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_DEVICE_RE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+)$")


def link_kind(cell: str) -> dict[str, Any]:
    """Describe one ``topo -m`` cell: {'kind': 'self'|'nvlink'|'pcie'|'unknown', 'nvlinks', 'path'}."""
    cell = cell.strip()
    if cell == "X":
        return {"kind": "self", "nvlinks": 0, "path": cell}
    match = re.match(r"^NV(\d+)$", cell)
    if match:
        return {"kind": "nvlink", "nvlinks": int(match.group(1)), "path": cell}
    if cell in ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC"):
        return {"kind": "pcie", "nvlinks": 0, "path": cell}
    return {"kind": "unknown", "nvlinks": 0, "path": cell}


def parse_topo_matrix(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi topo -m``.

    Returns {'devices': [...], 'matrix': {row: {col: cell}}, 'affinity': {gpu: {...}}, 'nics': {...}}.
    Works on raw output (TAB separated, ANSI underline on the header) and on copies whose
    TABs became spaces, by splitting rows on whitespace: affinity values hold no spaces.
    """
    lines = [strip_ansi(line).rstrip() for line in text.splitlines()]
    header_idx = None
    for i, line in enumerate(lines):
        tokens = line.split()
        # The header row is the first one naming GPU0 that is indented (data rows start at column 0)
        # or that continues with another column name rather than a cell.
        if (
            tokens
            and tokens[0] == "GPU0"
            and (line[:1].isspace() or tokens[1:2] in (["GPU1"], ["CPU"], ["NIC0"]))
        ):
            header_idx = i
            break
    if header_idx is None:
        raise ValueError("no 'GPU0' header row found in topo -m output")
    header = lines[header_idx]
    trailing = [name for name in _TRAILING_COLUMNS if name in header]
    devices = [tok for tok in header.split() if _DEVICE_RE.match(tok)]
    matrix: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str | None]] = {}
    nics: dict[str, str] = {}
    for line in lines[header_idx + 1 :]:
        if not line.strip():
            break
        tokens = line.split()
        label = tokens[0]
        if not _DEVICE_RE.match(label):
            break
        cells = tokens[1 : 1 + len(devices)]
        if len(cells) != len(devices):
            raise ValueError(f"row {label!r} has {len(cells)} cells for {len(devices)} devices")
        matrix[label] = {devices[i]: cells[i] for i in range(len(devices))}
        if label.startswith("GPU"):
            rest = tokens[1 + len(devices) :]
            affinity[label] = {
                name.lower().replace(" ", "_"): _na(rest[i]) if i < len(rest) else None
                for i, name in enumerate(trailing)
            }
    in_nic_legend = False
    for line in lines:
        if line.strip() == "NIC Legend:":
            in_nic_legend = True
            continue
        if in_nic_legend:
            match = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)", line)
            if match:
                nics[match.group(1)] = match.group(2)
    return {"devices": devices, "matrix": matrix, "affinity": affinity, "nics": nics}


# --- nvlink -s ----------------------------------------------------------------

_NVLINK_GPU_RE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: (\S+)\))?$")
_NVLINK_LINK_RE = re.compile(r"^\s*Link (\d+): (.*)$")


def parse_nvlink_status(text: str) -> dict[int, dict[str, Any]]:
    """Parse ``nvidia-smi nvlink -s``: per GPU index the links and their speed (GB/s, None if inactive)."""
    result: dict[int, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        gpu = _NVLINK_GPU_RE.match(line.strip())
        if gpu and not line[:1].isspace():
            current = {"name": gpu.group(2), "uuid": gpu.group(3), "links": {}, "message": None}
            result[int(gpu.group(1))] = current
            continue
        link = _NVLINK_LINK_RE.match(line)
        if link and current is not None:
            speed = re.match(r"^([0-9.]+) GB/s", link.group(2).strip())
            current["links"][int(link.group(1))] = float(speed.group(1)) if speed else None
        elif current is not None:
            current["message"] = line.strip()
    for entry in result.values():
        entry["active_links"] = sum(1 for speed in entry["links"].values() if speed)
    return result


# --- -L -----------------------------------------------------------------------

_L_GPU_RE = re.compile(r"^GPU (\d+): (.*) \(UUID: (\S+)\)$")
_L_MIG_RE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (\S+)\)$")


def parse_list_gpus(text: str) -> list[dict[str, Any]]:
    """Parse ``nvidia-smi -L``: index, name, uuid and MIG devices (profile, device, uuid)."""
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        gpu = _L_GPU_RE.match(line.strip()) if line[:1] != " " else None
        if gpu:
            gpus.append({"index": int(gpu.group(1)), "name": gpu.group(2), "uuid": gpu.group(3), "mig": []})
            continue
        mig = _L_MIG_RE.match(line)
        if mig and gpus:
            gpus[-1]["mig"].append(
                {"profile": mig.group(1), "device": int(mig.group(2)), "uuid": mig.group(3)}
            )
    return gpus


# --- plain nvidia-smi (the table) ------------------------------------------------

_TABLE_DRIVER_RE = re.compile(r"(?:Driver|KMD) Version:\s*([0-9][0-9.]*)")
_TABLE_CUDA_RE = re.compile(r"CUDA(?: UMD)? Version:\s*([0-9][0-9.]*)")
_TABLE_GPU_RE = re.compile(
    r"^\|\s+(?P<index>\d+)\s+(?P<name>\S.*?)\s+(?P<pm>On|Off)\s*\|\s*"
    r"(?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+\S+\s*\|(?P<ecc>[^|]*)\|\s*$"
)
_TABLE_MEM_RE = re.compile(r"\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|")
_TABLE_MIG_RE = re.compile(
    r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|\s*(\d+)\s"
)


def parse_table(text: str) -> dict[str, Any]:
    """Parse plain ``nvidia-smi`` (the summary table); same shape as ``parse_query``.

    The table names each GPU (cut to its column, ending in '...' when too long), its PCI bus id,
    persistence mode, memory total and, from driver 450, MIG mode and the MIG devices table.
    It has no UUID, no reserved memory and no compute capability. Drivers before 410 print no
    CUDA version; from 610 the header says 'KMD Version' and 'CUDA UMD Version'.
    """
    lines = strip_ansi(text).splitlines()
    header = next((line for line in lines if "NVIDIA-SMI" in line), "")
    driver = _TABLE_DRIVER_RE.search(header)
    cuda = _TABLE_CUDA_RE.search(header)
    result: dict[str, Any] = {
        "driver_version": driver.group(1) if driver else None,
        "cuda_version": cuda.group(1) if cuda else None,
        "attached_gpus": None,
        "gpus": [],
    }
    section = "gpus"
    by_index: dict[int, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    row = 0
    for line in lines:
        if "| MIG devices:" in line:
            section, current = "mig", None
            continue
        if "| Processes:" in line:
            section, current = "processes", None
            continue
        if section == "gpus":
            match = _TABLE_GPU_RE.match(line.rstrip())
            if match:
                name = match.group("name").strip()
                current = _blank_gpu(int(match.group("index")))
                current.update(
                    {
                        "name": name,
                        "pci_bus_id": normalize_bus_id(match.group("bus")),
                        "persistence_mode": match.group("pm") == "On",
                    }
                )
                result["gpus"].append(current)
                by_index[current["index"]] = current
                row = 0
                continue
            if current is None or not line.startswith("|"):
                current = None if line.startswith("+") or not line.strip() else current
                continue
            row += 1
            mem = _TABLE_MEM_RE.search(line)
            if row == 1 and mem:
                current["memory_total_mib"] = int(mem.group(2))
            elif row == 2:
                current["mig_mode"] = _mode(line.rstrip().rstrip("|").rsplit("|", 1)[-1])
        elif section == "mig":
            match = _TABLE_MIG_RE.match(line)
            if match and int(match.group(1)) in by_index:
                gpu_idx, gi, ci, dev, _used, total, sms = (int(v) for v in match.groups())
                by_index[gpu_idx]["mig_devices"].append(
                    {
                        "index": dev,
                        "gpu_instance_id": gi,
                        "compute_instance_id": ci,
                        "memory_total_mib": total,
                        "multiprocessor_count": sms,
                    }
                )
    return result


# --- warnings ----------------------------------------------------------------------

_WARNING_RE = re.compile(r"^\s*WARNING:\s*(.+?)\s*$", re.M)


def find_warnings(text: str) -> list[str]:
    """The 'WARNING: ...' lines nvidia-smi prints among its data (infoROM corrupted, ...)."""
    return [m.group(1) for m in _WARNING_RE.finditer(strip_ansi(text or ""))]


def nvlink_warnings(nvlink: dict[int, dict[str, Any]] | None) -> list[str]:
    """Inactive NVLink links of GPUs whose other links are up, and GPUs whose links are all down."""
    warnings = []
    for index, entry in sorted((nvlink or {}).items()):
        links = entry.get("links") or {}
        inactive = sorted(link for link, speed in links.items() if not speed)
        label = f"GPU {index} ({entry.get('name')})"
        if links and inactive and len(inactive) < len(links):
            warnings.append(
                f"{label}: NVLink degraded, links {', '.join(str(i) for i in inactive)} inactive "
                f"({len(links) - len(inactive)} of {len(links)} active)"
            )
        elif links and inactive:
            warnings.append(f"{label}: all {len(links)} NVLink links inactive")
        elif "all links are inactive" in (entry.get("message") or "").lower():
            warnings.append(f"{label}: {entry['message']}")
    return warnings


# --- /proc/driver/nvidia/version -------------------------------------------------


def parse_proc_version(text: str) -> str | None:
    """Version of the loaded kernel module from /proc/driver/nvidia/version."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+([0-9]+\.[0-9]+(?:\.[0-9]+)?)", text)
    return match.group(1) if match else None


# --- facts ------------------------------------------------------------------------


def empty_facts(state: str, error: str | None = None) -> dict[str, Any]:
    return {
        "present": False,
        "state": state,
        "count": 0,
        "driver_version": None,
        "cuda_version": None,
        "kernel_module_version": None,
        "nvml_mismatch": state == STATE_NVML_MISMATCH,
        "nvml_library_version": None,
        "error": error,
        "source": None,
        "gpus": [],
        "models": {},
        "homogeneous": True,
        "topology": _empty_topology("none" if state in (STATE_NO_DEVICES, STATE_NO_DRIVER) else "unknown"),
        "notes": [],
        "warnings": [],
    }


def _empty_topology(interconnect: str) -> dict[str, Any]:
    return {
        "source": None,
        "interconnect": interconnect,
        "nvswitch": False,
        "links": [],
        "nvlink_islands": [],
        "numa": {},
        "numa_nodes": {},
    }


def _islands(indices: list[int], edges: list[tuple[int, int]]) -> list[list[int]]:
    parent = {i: i for i in indices}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in edges:
        parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for i in indices:
        groups.setdefault(find(i), []).append(i)
    return sorted(sorted(g) for g in groups.values())


def build_topology(
    gpus: list[dict[str, Any]],
    topo: dict[str, Any] | None,
    nvlink: dict[int, dict[str, Any]] | None,
) -> dict[str, Any]:
    """Link type between every GPU pair, NVSwitch detection, NVLink islands, NUMA affinity."""
    indices = [g["index"] for g in gpus]
    if not gpus:
        return _empty_topology("none")
    topology = _empty_topology("none" if len(gpus) == 1 else "unknown")
    joined = [(g.get("fabric_state") or "").lower() in ("completed", "in progress") for g in gpus]
    fabric, fabric_all = any(joined), all(joined)
    if topo is not None:
        topology["source"] = "topo"
        for gpu in gpus:
            aff = topo["affinity"].get(f"GPU{gpu['index']}", {})
            numa = aff.get("numa_affinity")
            gpu["cpu_affinity"] = aff.get("cpu_affinity")
            gpu["numa_node"] = int(numa) if numa is not None and numa.isdigit() else None
    pairs: list[dict[str, Any]] = []
    if topo is not None:
        matrix = topo["matrix"]
        for pos, a in enumerate(indices):
            for b in indices[pos + 1 :]:
                cell = matrix.get(f"GPU{a}", {}).get(f"GPU{b}")
                if cell is None:
                    continue
                pairs.append({"gpus": [a, b], **link_kind(cell)})
    elif len(gpus) > 1 and fabric_all and len({g.get("fabric_clique_id") for g in gpus}) == 1:
        # Every GPU joined the same NVSwitch fabric clique: each pair is linked through NVSwitch.
        topology["source"] = "fabric"
        pairs = [
            {"gpus": [a, b], "kind": "nvlink", "nvlinks": None, "path": None}
            for pos, a in enumerate(indices)
            for b in indices[pos + 1 :]
        ]
    elif len(gpus) > 1 and all((product_info(g["name"]) or {}).get("nvlink") is False for g in gpus):
        # These products have no NVLink at all: every pair talks over PCIe.
        topology["source"] = "product"
        pairs = [
            {"gpus": [a, b], "kind": "pcie", "nvlinks": 0, "path": None}
            for pos, a in enumerate(indices)
            for b in indices[pos + 1 :]
        ]
    # NVSwitch: a GPU's bonded NVLink count summed over its peers exceeds the links it has,
    # which only a switch allows (a direct mesh splits the links between peers).
    switch = fabric
    for gpu in gpus:
        idx = gpu["index"]
        total = sum(p["nvlinks"] or 0 for p in pairs if p["kind"] == "nvlink" and idx in p["gpus"])
        if not total:
            continue
        links = (nvlink or {}).get(idx, {}).get("active_links") or (product_info(gpu["name"]) or {}).get(
            "sxm_nvlinks"
        )
        if links and total > links:
            switch = True
    topology["nvswitch"] = switch
    for pair in pairs:
        if pair["kind"] == "nvlink" and switch:
            pair["kind"] = "nvswitch"
    topology["links"] = pairs
    if len(gpus) > 1 and pairs and len(pairs) == len(indices) * (len(indices) - 1) // 2:
        kinds = {p["kind"] for p in pairs}
        if kinds <= {"nvswitch"}:
            topology["interconnect"] = "nvswitch"
        elif kinds <= {"nvlink", "nvswitch"}:
            topology["interconnect"] = "nvlink"
        elif kinds <= {"pcie"}:
            topology["interconnect"] = "pcie"
        elif kinds & {"nvlink", "nvswitch"}:
            topology["interconnect"] = "mixed"
    edges = [(p["gpus"][0], p["gpus"][1]) for p in pairs if p["kind"] in ("nvlink", "nvswitch")]
    topology["nvlink_islands"] = _islands(indices, edges)
    numa = {str(g["index"]): g.get("numa_node") for g in gpus if g.get("numa_node") is not None}
    topology["numa"] = numa
    nodes: dict[str, list[int]] = {}
    for gpu in gpus:
        if gpu.get("numa_node") is not None:
            nodes.setdefault(str(gpu["numa_node"]), []).append(gpu["index"])
    topology["numa_nodes"] = nodes
    return topology


def _match(gpu: dict[str, Any], candidates: list[dict[str, Any]], pos: int) -> dict[str, Any] | None:
    """The entry of another form that describes ``gpu``: same UUID, else same PCI bus id, else same index."""
    for key in ("uuid", "pci_bus_id"):
        if gpu.get(key):
            found = [c for c in candidates if c.get(key) == gpu[key]]
            if found:
                return found[0]
    found = [c for c in candidates if c.get("index") == gpu["index"]]
    return found[0] if found else (candidates[pos] if pos < len(candidates) and not gpu.get("uuid") else None)


def _gpu_instance_profile(profile: str | None) -> str | None:
    """'1c.3g.71gb' (a compute instance of a 3g.71gb GPU instance) -> '3g.71gb'; '3g.40gb' stays."""
    if not profile:
        return None
    return re.sub(r"^\d+c\.", "", profile)


def mig_instances(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per MIG GPU instance: its memory once, however many compute instances share it.

    Each compute instance is a CUDA device of its own (its own MIG UUID) but all compute
    instances of one GPU instance share that instance's memory, so a server per GPU instance
    (on its first compute instance) is what the memory allows.
    """
    instances: dict[Any, dict[str, Any]] = {}
    for dev in gpu.get("mig_devices") or []:
        key = dev.get("gpu_instance_id")
        if key is None:
            key = ("device", dev.get("index"))
        inst = instances.get(key)
        if inst is None:
            inst = instances[key] = {
                "gpu_instance_id": dev.get("gpu_instance_id"),
                "profile": _gpu_instance_profile(dev.get("profile")),
                "memory_total_mib": dev.get("memory_total_mib"),
                "multiprocessor_count": 0,
                "devices": [],
                "uuids": [],
            }
        inst["devices"].append(dev.get("index"))
        if dev.get("uuid"):
            inst["uuids"].append(dev["uuid"])
        inst["multiprocessor_count"] += dev.get("multiprocessor_count") or 0
        if inst["memory_total_mib"] is None:
            inst["memory_total_mib"] = dev.get("memory_total_mib")
        if inst["profile"] is None:
            inst["profile"] = _gpu_instance_profile(dev.get("profile"))
    for inst in instances.values():
        inst["multiprocessor_count"] = inst["multiprocessor_count"] or None
    return list(instances.values())


def build_facts(
    query: dict[str, Any],
    query_gpu: list[dict[str, str | None]] | None = None,
    topo: dict[str, Any] | None = None,
    nvlink: dict[int, dict[str, Any]] | None = None,
    kernel_module_version: str | None = None,
    listed: list[dict[str, Any]] | None = None,
    source: str = "query",
) -> dict[str, Any]:
    """Combine parsed outputs into the facts.

    ``query`` is the report the GPUs come from (``parse_query``, ``parse_query_xml``,
    ``report_from_query_gpu``, ``parse_table`` or ``report_from_list``) and ``source`` names its
    form. ``query_gpu`` rows supply the compute capability the driver reports; ``listed``
    (``parse_list_gpus``) the MIG profile names and UUIDs, which only ``-L`` prints.
    """
    gpus = [dict(g, mig_devices=[dict(d) for d in g.get("mig_devices") or []]) for g in query["gpus"]]
    facts = empty_facts(STATE_OK if gpus else STATE_NO_DEVICES)
    if not gpus:
        facts["error"] = "nvidia-smi reported no GPUs"
    rows = [
        {
            "index": _int(r.get("index")),
            "uuid": r.get("uuid"),
            "pci_bus_id": normalize_bus_id(r.get("pci.bus_id")),
            "compute_cap": r.get("compute_cap"),
        }
        for r in query_gpu or []
    ]
    for pos, gpu in enumerate(gpus):
        row = _match(gpu, rows, pos) if rows else None
        info = product_info(gpu["name"])
        cc = row.get("compute_cap") if row else None
        if cc:
            gpu["compute_capability"], gpu["compute_capability_source"] = cc, "nvidia-smi"
        elif info:
            gpu["compute_capability"], gpu["compute_capability_source"] = (
                info["compute_capability"],
                "product",
            )
        else:
            gpu["compute_capability"], gpu["compute_capability_source"] = None, None
        if not gpu.get("architecture") and info:
            gpu["architecture"] = info["architecture"]
        entry = _match(gpu, listed, pos) if listed else None
        by_device = {m["device"]: m for m in (entry or {}).get("mig", [])}
        for dev in gpu["mig_devices"]:
            mig = by_device.get(dev.get("index"), {})
            dev["profile"] = mig.get("profile")
            dev["uuid"] = mig.get("uuid")
        gpu["mig_instances"] = mig_instances(gpu)
        gpu.setdefault("numa_node", None)
        gpu.setdefault("cpu_affinity", None)
    topology = build_topology(gpus, topo, nvlink)
    models: dict[str, int] = {}
    for gpu in gpus:
        models[gpu["name"] or "unknown"] = models.get(gpu["name"] or "unknown", 0) + 1
    facts.update(
        {
            "present": bool(gpus),
            "source": source if gpus else None,
            "count": len(gpus),
            "driver_version": query.get("driver_version"),
            "cuda_version": query.get("cuda_version"),
            "kernel_module_version": kernel_module_version,
            "gpus": gpus,
            "models": models,
            "homogeneous": len(models) <= 1,
            "topology": topology,
            "warnings": nvlink_warnings(nvlink),
        }
    )
    attached = query.get("attached_gpus")
    if attached is not None and attached != len(gpus):
        facts["notes"].append(f"nvidia-smi says {attached} GPUs are attached but describes {len(gpus)}")
    return facts


# The forms GPUs are read from, most detailed first: key in ``results``, words for notes, parser.
FORMS: tuple[tuple[str, str], ...] = (
    ("query", "nvidia-smi -q"),
    ("query_xml", "nvidia-smi -q -x"),
    ("query_gpu", "nvidia-smi --query-gpu"),
    ("table", "nvidia-smi"),
    ("list", "nvidia-smi -L"),
)
# Failures that no other form of nvidia-smi gets past.
HOST_FAILURES = (STATE_NVML_MISMATCH, STATE_NO_DEVICES, STATE_DRIVER_NOT_LOADED, STATE_NVML_MISSING)


def host_failure(result: tuple[int | None, str, str]) -> dict[str, Any] | None:
    """The failure of one nvidia-smi call when it is the host's (NVML, driver), None otherwise."""
    rc, out, err = result
    failure = classify_failure(out + ("\n" + err if err else ""), 12 if rc == 12 else None)
    return failure if failure and failure["state"] in HOST_FAILURES else None


def query_gpu_needs_legacy(result: tuple[int | None, str, str]) -> bool:
    """The --query-gpu call failed because the driver does not know a field (compute_cap before 510)."""
    rc, out, err = result
    return rc not in (0, None) and "not a valid field" in (out + err)


def next_call(
    results: dict[str, tuple[int | None, str, str]], topology: bool = True
) -> tuple[str, tuple[str, ...]] | None:
    """The next nvidia-smi call to make given the results so far, as (results key, arguments); None when done.

    ``-q`` first. A host failure (NVML, driver) or a hung ``-q`` ends it. Then the CSV query
    (again without compute_cap when the driver refuses that field); when ``-q`` printed no report,
    ``-q -x``, the table and ``-L`` as fallbacks; ``-L`` also when there are MIG devices (only it names
    their profiles); then ``topo -m`` and ``nvlink -s`` when ``topology``.
    """
    if "query" not in results:
        return "query", DETAIL_ARGS
    rc, out, _err = results["query"]
    if rc is None or host_failure(results["query"]) is not None:
        return None
    report = "Attached GPUs" in out
    wanted: list[tuple[str, tuple[str, ...]]] = [("query_gpu", QUERY_ARGS)]
    if "query_gpu" in results and query_gpu_needs_legacy(results["query_gpu"]):
        wanted.append(("query_gpu_legacy", QUERY_ARGS_LEGACY))
    if not report:
        wanted = [("query_xml", XML_ARGS), *wanted, ("table", TABLE_ARGS)]
    if not report or "MIG Device" in out:
        wanted.append(("list", LIST_ARGS))
    if topology:
        wanted += [("topo", TOPO_ARGS), ("nvlink", NVLINK_ARGS)]
    return next(((key, args) for key, args in wanted if key not in results), None)


def _query_xml_report(text: str) -> dict[str, Any]:
    if "<nvidia_smi_log" not in text:
        raise ValueError("printed no XML report")
    try:
        return parse_query_xml(text)
    except ET.ParseError as exc:
        raise ValueError(f"printed XML that does not parse: {exc}") from None


def _query_report(text: str) -> dict[str, Any]:
    if "Attached GPUs" not in text:
        raise ValueError("printed no GPU report")
    return parse_query(text)


def _query_gpu_rows(
    results: dict[str, tuple[int | None, str, str]],
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Rows of the --query-gpu call that answered (the full field list, else the legacy one), and why not."""
    for key, fields in (("query_gpu", QUERY_FIELDS), ("query_gpu_legacy", QUERY_FIELDS_LEGACY)):
        if key not in results:
            continue
        rc, out, err = results[key]
        if rc != 0:
            continue
        try:
            rows = parse_query_gpu_csv(out, fields)
        except ValueError as exc:
            return None, f"output not understood: {exc}"
        return rows, None
    return None, None


def facts_from_results(
    results: dict[str, tuple[int | None, str, str]],
    kernel_module_version: str | None = None,
) -> dict[str, Any]:
    """Facts from raw command results.

    ``results`` maps 'query' (``-q``), 'query_xml' (``-q -x``), 'query_gpu' (``QUERY_ARGS``),
    'query_gpu_legacy' (``QUERY_ARGS_LEGACY``), 'table' (plain ``nvidia-smi``), 'list' (``-L``),
    'topo' and 'nvlink' to (rc, stdout, stderr) (``next_call`` says which to make); only 'query'
    is required. rc None means the command timed out.
    The GPUs come from the first of -q, -q -x, --query-gpu, the table and -L that describes any
    (``source`` says which); the others fill in what that form lacks.
    """
    rc, out, err = results["query"]
    if rc is None:
        facts = empty_facts(STATE_TIMEOUT, "nvidia-smi -q did not answer in time (hung driver or GPU?)")
        facts["kernel_module_version"] = kernel_module_version
        return facts
    failure = host_failure(results["query"])
    if failure is not None:
        facts = empty_facts(failure["state"], failure["message"])
        facts["nvml_library_version"] = failure["nvml_library_version"]
        facts["kernel_module_version"] = kernel_module_version
        return facts
    notes: list[str] = []

    def describe(what: str, result: tuple[int | None, str, str]) -> str:
        """'<call> exited N: <first line it printed>'."""
        orc, oout, oerr = result
        reason = "timed out" if orc is None else f"exited {orc}"
        detail = [line.strip() for line in (oout.strip() or oerr.strip()).splitlines() if line.strip()][:1]
        return f"{what} {reason}{': ' + detail[0] if detail else ''}"

    def optional(key: str, what: str, parser: Any) -> Any:
        if key not in results:
            return None
        orc, oout, _oerr = results[key]
        if orc != 0:
            notes.append(describe(what, results[key]))
            return None
        try:
            return parser(oout)
        except ValueError as exc:
            notes.append(f"{what} output not understood: {exc}")
            return None

    query_gpu, csv_problem = _query_gpu_rows(results)
    if "query_gpu" in results and query_gpu is None:
        failed = results.get("query_gpu_legacy", results["query_gpu"])
        what = "nvidia-smi " + " ".join(QUERY_ARGS_LEGACY if "query_gpu_legacy" in results else QUERY_ARGS)
        notes.append(f"{what} {csv_problem}" if csv_problem else describe(what, failed))
    elif "query_gpu_legacy" in results and query_gpu is not None:
        notes.append(
            "nvidia-smi --query-gpu does not know compute_cap on this driver: compute capability "
            "from the product name"
        )
    reports: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    for key, what in FORMS:
        if key not in results:
            continue
        orc, oout, oerr = results[key]
        try:
            if key == "query":
                report = _query_report(oout)
            elif key == "query_xml":
                report = _query_xml_report(oout)
            elif key == "query_gpu":
                report = report_from_query_gpu(query_gpu) if query_gpu else {"gpus": []}
            elif key == "table":
                report = parse_table(oout)
            else:
                report = report_from_list(parse_list_gpus(oout))
        except ValueError as exc:
            failures.append(f"{what} {exc}" if orc == 0 else describe(what, results[key]))
            continue
        if report["gpus"] or (key == "query" and orc == 0):
            reports[key] = report
            if orc not in (0, None):
                failures.append(f"{what} exited {orc} but printed its report")
        elif key != "query_gpu":
            failures.append(describe(what, results[key]) if orc != 0 else f"{what} described no GPU")
    source = next((key for key, _what in FORMS if key in reports), None)
    if source is None:
        first = failures[0] if failures else "nvidia-smi -q printed no GPU report"
        facts = empty_facts(STATE_ERROR, first)
        facts["kernel_module_version"] = kernel_module_version
        facts["notes"] = notes + failures[1:]
        facts["warnings"] = _all_warnings(results)
        return facts
    notes.extend(failures)
    if source != "query":
        notes.append(f"GPUs read from {dict(FORMS)[source]} (the forms before it gave none)")
    report = dict(reports[source])
    for key in ("table", "query_gpu"):
        other = reports.get(key)
        if other:
            report["driver_version"] = report.get("driver_version") or other.get("driver_version")
            report["cuda_version"] = report.get("cuda_version") or other.get("cuda_version")
    if source in ("query_gpu", "list") and "table" in reports:
        # The table holds memory, persistence and MIG devices the list lacks, and MIG devices the CSV lacks.
        table = reports["table"]["gpus"]
        merged = []
        for pos, gpu in enumerate(report["gpus"]):
            row = _match(gpu, table, pos) or {}
            gpu = dict(gpu)
            for key, value in row.items():
                if gpu.get(key) in (None, []) and key not in ("uuid", "name"):
                    gpu[key] = value
            merged.append(gpu)
        report["gpus"] = merged
    if source == "table" and "list" in reports:
        # -L prints the names in full (the table cuts them) and the UUIDs.
        listed_gpus = reports["list"]["gpus"]
        report["gpus"] = [
            dict(g, **{k: (_match(g, listed_gpus, pos) or {}).get(k) or g[k] for k in ("uuid", "name")})
            for pos, g in enumerate(report["gpus"])
        ]
    topo = optional("topo", "nvidia-smi topo -m", parse_topo_matrix)
    nvlink = optional("nvlink", "nvidia-smi nvlink -s", parse_nvlink_status)
    listed = optional("list", "nvidia-smi -L", parse_list_gpus) if "list" in results else None
    facts = build_facts(report, query_gpu, topo, nvlink, kernel_module_version, listed=listed, source=source)
    facts["warnings"] = _all_warnings(results) + facts["warnings"]
    truncated = [g["name"] for g in facts["gpus"] if (g["name"] or "").endswith("...")]
    if truncated:
        notes.append(f"GPU names cut by the table: {', '.join(sorted(set(truncated)))}")
    facts["notes"] = notes + facts["notes"]
    if kernel_module_version and facts["driver_version"] and kernel_module_version != facts["driver_version"]:
        facts["notes"].append(
            f"loaded kernel module {kernel_module_version} differs from driver {facts['driver_version']}"
        )
    return facts


def _all_warnings(results: dict[str, tuple[int | None, str, str]]) -> list[str]:
    """Every distinct 'WARNING:' line of every call, in call order."""
    seen: list[str] = []
    for _rc, out, err in results.values():
        for warning in find_warnings(out) + find_warnings(err):
            if warning not in seen:
                seen.append(warning)
    return seen
