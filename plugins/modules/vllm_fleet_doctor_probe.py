#!/usr/bin/python
# Copyright: vllm-fleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: read what the vllm-fleet doctor checks on one host, changing nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_fleet_doctor_probe
short_description: Read the host state the vllm-fleet doctor checks
description:
  - Reads, without changing anything, what C(playbooks/doctor.yml) needs from a host in one call, that is
    free space of paths, the size and metadata of model folders, memory, C(/dev/shm), listening
    TCP ports and the processes behind them, running containers (IPC mode, C(/dev/shm) size, labels,
    command), the CUDA version of images, the NVIDIA container toolkit, ECC state from
    C(nvidia-smi -q), and clock synchronisation (C(timedatectl), C(chronyc)).
  - Judging the readings is done on the control node (plugins/plugin_utils/fleet_ops/doctor/).
version_added: "1.0.0"
author: vllm-fleet maintainers (@vllm-fleet)
options:
  paths:
    description:
      - Paths whose file system free space to read. A missing path is measured at its nearest
        existing parent. C(/dev/shm) is always read.
    type: list
    elements: str
    default: []
  model_dirs:
    description:
      - Model folders to measure, each C({name, path}); or C({name, base, revision}) for the
        C(<root>/<org>/<name>/<revision>) layout, where the newest revision folder under C(base)
        stands in when C(revision) (a branch name) has no folder of its own.
      - A served model may add C(adapters) (each C({name, path}) or C({name, base, revision})) and C(draft)
        (the folder of its draft model or EAGLE head), whose C(adapter_config.json) and C(config.json) are
        read so that the doctor plans the model as the serve stage does.
    type: list
    elements: dict
    default: []
  ports:
    description: TCP ports whose listeners (and their processes) to report.
    type: list
    elements: int
    default: []
  docker:
    description:
      - What the community.docker info modules read on this host (the fleet_doctor role's probe tasks),
        as C(socket), C(error) (why Docker could not be read; empty when it could), C(host_info)
        (community.docker.docker_host_info), C(containers) (the results of
        community.docker.docker_container_info over the running containers), C(images) (the results of
        community.docker.docker_image_info over the images to check for their CUDA version) and C(shm)
        (the results of community.docker.docker_container_exec printing the size of C(/dev/shm) in the running
        vLLM containers, the size their processes get; with ipc=host, that of the Docker engine's host).
      - Omitted or empty, containers and images are reported as unavailable.
    type: dict
    default: {}
  nvidia_smi:
    description: Run C(nvidia-smi -q) for ECC and row-remapping state.
    type: bool
    default: true
  label_prefix:
    description: Prefix of the labels the vllm_server role puts on its containers.
    type: str
    default: io.vllm-fleet
  controller_time:
    description:
      - The control node's clock (epoch seconds) when the task was sent; returned with the host's clock,
        read first thing, to measure the skew between them.
    type: float
attributes:
  check_mode:
    support: full
    description: Reads only; the same readings in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
"""

EXAMPLES = r"""
- name: Probe the host
  vllm_fleet_doctor_probe:
    paths: [/srv/models]
    model_dirs:
      - {name: llama, path: /srv/models/meta-llama/Llama-3.1-8B-Instruct/0e9e39f}
    ports: [8000]
    docker:
      socket: /var/run/docker.sock
      error: ""
      host_info: "{{ docker_host.host_info }}"
      containers: "{{ docker_containers.results }}"
      images: "{{ docker_images.results }}"
      shm: "{{ docker_shm.results }}"
  register: probe
"""

RETURN = r"""
probe:
  description: The readings; see plugins/plugin_utils/fleet_ops/doctor/ for how they are judged.
  returned: always
  type: dict
"""

import glob
import json
import os
import subprocess
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils.doctor_probe import (
    container_summary,
    looks_like_vllm,
    parse_chronyc_tracking,
    parse_ecc,
    parse_key_values,
    parse_meminfo,
    parse_proc_net_tcp,
    parse_shm_size,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils.nvidia_host import cuda_version_from_image

MAX_CONFIG_BYTES = 2 * 1024 * 1024


def disk(path: str) -> dict[str, Any]:
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe.rstrip("/")) or "/"
        if parent == probe:
            break
        probe = parent
    st = os.statvfs(probe)
    mount = probe
    while mount != "/" and not os.path.ismount(mount):
        mount = os.path.dirname(mount) or "/"
    return {
        "path": path,
        "measured_at": probe,
        "exists": probe == path,
        "mount": mount,
        "total_bytes": st.f_blocks * st.f_frsize,
        "free_bytes": st.f_bavail * st.f_frsize,
    }


def _read_json(path: str) -> Any:
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            return None
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def resolve_dir(base: str, revision: str) -> tuple[str, str]:
    """The folder of a model revision in the model_weights layout, and how it was found.

    ``<base>/<revision>``; else the revision a branch or tag resolved to (``<base>/refs/<revision>``);
    else a download in progress (``<base>/.staging-<revision>``); else the newest revision folder.
    """
    path = os.path.join(base, revision)
    if os.path.isdir(path):
        return path, "revision"
    try:
        with open(os.path.join(base, "refs", revision.replace("/", "%2F")), encoding="utf-8") as handle:
            resolved = handle.read().strip()
        if resolved and os.path.isdir(os.path.join(base, resolved)):
            return os.path.join(base, resolved), "ref"
    except OSError:
        pass
    staging = os.path.join(base, ".staging-" + revision)
    if os.path.isdir(staging):
        return staging, "staging"
    if os.path.isdir(base):
        candidates = [
            os.path.join(base, d)
            for d in os.listdir(base)
            if not d.startswith(".") and d != "refs" and os.path.isdir(os.path.join(base, d))
        ]
        if candidates:
            return max(candidates, key=os.path.getmtime), "newest revision folder"
    return path, "missing"


def model_dir(spec: dict[str, Any]) -> dict[str, Any]:
    name = str(spec.get("name") or "")
    path = spec.get("path")
    found = "path"
    if not path and spec.get("base"):
        path, found = resolve_dir(str(spec["base"]), str(spec.get("revision") or "main"))
    info: dict[str, Any] = {
        "name": name,
        "dir": path,
        "exists": bool(path) and os.path.isdir(path),
        "found_by": found,
        "bytes_present": 0,
        "weights_bytes": 0,
        "files": 0,
        "index_total_size": None,
        "config": None,
        "index": None,
        "adapter_configs": {},
        "draft_config": None,
    }
    for adapter in spec.get("adapters") or []:
        where = adapter.get("path") or resolve_dir(str(adapter.get("base")), str(adapter.get("revision")))[0]
        info["adapter_configs"][str(adapter.get("name"))] = _read_json(
            os.path.join(where, "adapter_config.json")
        )
    if spec.get("draft"):
        info["draft_config"] = _read_json(os.path.join(str(spec["draft"]), "config.json"))
    if not info["exists"]:
        return info
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for fname in files:
            try:
                size = os.lstat(os.path.join(root, fname)).st_size
            except OSError:
                continue
            info["bytes_present"] += size
            info["files"] += 1
            if fname.endswith((".safetensors", ".bin", ".pt", ".gguf")):
                info["weights_bytes"] += size
    index = _read_json(os.path.join(path, "model.safetensors.index.json"))
    if isinstance(index, dict):
        total = (index.get("metadata") or {}).get("total_size")
        if isinstance(total, (int, float)) and total > 0:
            info["index_total_size"] = int(total)
        info["index"] = index  # the planner reads it as the serve stage's plan does
    config = _read_json(os.path.join(path, "config.json"))
    info["config"] = config if isinstance(config, dict) else None
    return info


def listeners(ports: list[int]) -> dict[str, list[dict[str, Any]]]:
    wanted = set(ports)
    found: dict[int, list[dict[str, Any]]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            continue
        for sock in parse_proc_net_tcp(text):
            if sock["port"] in wanted:
                found.setdefault(sock["port"], []).append(dict(sock, processes=[]))
    inodes = {s["inode"]: s for socks in found.values() for s in socks}
    if inodes:
        for fd_dir in glob.glob("/proc/[0-9]*/fd"):
            pid = fd_dir.split("/")[2]
            try:
                fds = os.listdir(fd_dir)
            except OSError:
                continue
            links = []
            for fd in fds:
                try:  # descriptors close while we look (this very listing's among them)
                    links.append(os.readlink(os.path.join(fd_dir, fd)))
                except OSError:
                    continue
            for link in links:
                if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                    try:
                        with open(f"/proc/{pid}/cmdline", "rb") as handle:
                            cmd = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
                    except OSError:
                        cmd = ""
                    procs = inodes[int(link[8:-1])]["processes"]
                    if not any(p["pid"] == int(pid) for p in procs):
                        procs.append({"pid": int(pid), "cmdline": cmd[:300]})
    return {str(port): socks for port, socks in found.items()}


def container_shm(result: Any) -> tuple[int | None, str | None]:
    """The /dev/shm size printed in a container (a docker_container_exec result), or why there is none."""
    if not isinstance(result, dict):
        return None, "not measured"
    output = str(result.get("stdout") or "")
    size = parse_shm_size(output) if result.get("rc") == 0 else None
    if size is not None:
        return size, None
    return None, (
        str(result.get("msg") or "") + " " + output + " " + str(result.get("stderr") or "")
    ).strip()[:200]


def docker_state(docker: dict[str, Any], label_prefix: str) -> tuple[dict, list, dict, dict]:
    """Judge-ready Docker readings from what the community.docker info modules returned (see O(docker))."""
    info: dict[str, Any] = {
        "available": False,
        "socket": docker.get("socket") or "",
        "error": docker.get("error") or None,
    }
    shm = {
        result["item"]: result
        for result in docker.get("shm") or []
        if isinstance(result, dict) and isinstance(result.get("item"), str)
    }
    containers: list[dict[str, Any]] = []
    image_info: dict[str, Any] = {}
    toolkit_runtime: dict[str, Any] = {}
    host = docker.get("host_info")
    if info["error"] or not isinstance(host, dict):
        info["error"] = info["error"] or f"no answer from the Docker API at {info['socket']}"
        return info, containers, image_info, toolkit_runtime
    for result in docker.get("containers") or []:
        inspect = result.get("container") if isinstance(result, dict) else None
        if not inspect:
            continue  # gone between the listing and the inspection
        summary = container_summary(inspect)
        summary["vllm"] = looks_like_vllm(summary, label_prefix)
        if summary["vllm"] and summary["running"]:
            summary["dev_shm_bytes"], summary["dev_shm_error"] = container_shm(shm.get(inspect.get("Id")))
        containers.append(summary)
    for result in docker.get("images") or []:
        if not isinstance(result, dict) or "item" not in result or "images" not in result:
            continue
        found = result["images"] or []
        config = (found[0].get("Config") or {}) if found else {}
        image_info[result["item"]] = {
            "present": bool(found),
            "cuda_version": cuda_version_from_image(config) if found else None,
        }
    toolkit_runtime = {
        "runtime": "nvidia" in (host.get("Runtimes") or {}),
        "default_runtime": host.get("DefaultRuntime"),
        "cdi_spec_dirs": host.get("CDISpecDirs") or [],
    }
    info["available"] = True
    return info, containers, image_info, toolkit_runtime


def run(cmd: list[str], timeout: int = 30) -> tuple[int | None, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return None, ""
    except subprocess.TimeoutExpired:
        return -1, "timed out"
    return proc.returncode, proc.stdout + proc.stderr


def which(module: AnsibleModule, name: str) -> str | None:
    return module.get_bin_path(name, opt_dirs=["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin"])


def clock(module: AnsibleModule) -> dict[str, Any]:
    out: dict[str, Any] = {
        "epoch": time.time(),
        "ntp_synchronized": None,
        "ntp_service": None,
        "chrony": None,
        "container": False,
    }
    detect = which(module, "systemd-detect-virt")
    if detect:
        rc, text = run([detect, "--container"])
        out["container"] = rc == 0 and text.strip() not in ("", "none")
    out["container"] = (
        out["container"] or os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    )
    timedatectl = which(module, "timedatectl")
    if timedatectl:
        rc, text = run([timedatectl, "show"])
        if rc == 0:
            values = parse_key_values(text)
            if values.get("NTPSynchronized") in ("yes", "no"):
                out["ntp_synchronized"] = values["NTPSynchronized"] == "yes"
            out["ntp_service"] = "timedatectl NTP=" + values.get("NTP", "?")
    chronyc = which(module, "chronyc")
    if chronyc:
        rc, text = run([chronyc, "tracking"])
        if rc == 0:
            out["chrony"] = parse_chronyc_tracking(text)
    return out


def toolkit(module: AnsibleModule, runtime: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"runtime": bool(runtime.get("runtime")), "cli_version": None, "cdi_specs": []}
    cli = which(module, "nvidia-container-cli")
    if cli:
        rc, text = run([cli, "--version"])
        if rc == 0:
            first = text.strip().splitlines()[0] if text.strip() else ""
            out["cli_version"] = first.rsplit(":", maxsplit=1)[-1].strip() or first
    dirs = list(runtime.get("cdi_spec_dirs") or []) + ["/etc/cdi", "/var/run/cdi"]
    for folder in dict.fromkeys(dirs):
        out["cdi_specs"] += sorted(
            glob.glob(os.path.join(folder, "nvidia*.yaml")) + glob.glob(os.path.join(folder, "nvidia*.json"))
        )
    out["cdi_specs"] = list(dict.fromkeys(out["cdi_specs"]))
    return out


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "str", "default": []},
            "model_dirs": {"type": "list", "elements": "dict", "default": []},
            "ports": {"type": "list", "elements": "int", "default": []},
            "docker": {"type": "dict", "default": {}},
            "nvidia_smi": {"type": "bool", "default": True},
            "label_prefix": {"type": "str", "default": "io.vllm-fleet"},
            "controller_time": {"type": "float"},
        },
        supports_check_mode=True,
    )
    p = module.params
    errors: list[str] = []
    probe: dict[str, Any] = {}
    probe["time"] = clock(module)
    probe["time"]["controller_time"] = p["controller_time"]
    probe["disks"] = {}
    for path in list(dict.fromkeys(list(p["paths"]) + ["/dev/shm"])):
        try:
            probe["disks"][path] = disk(path)
        except OSError as exc:
            errors.append(f"cannot measure {path}: {exc}")
    probe["model_dirs"] = {}
    for spec in p["model_dirs"]:
        info = model_dir(spec)
        probe["model_dirs"][info["name"]] = info
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            probe["memory"] = parse_meminfo(handle.read())
    except OSError as exc:
        errors.append(f"cannot read /proc/meminfo: {exc}")
        probe["memory"] = {}
    probe["listeners"] = listeners(p["ports"])
    docker, containers, images, runtime = docker_state(p["docker"], p["label_prefix"])
    probe.update(docker=docker, containers=containers, images=images)
    probe["toolkit"] = toolkit(module, runtime)
    probe["ecc"] = []
    smi = which(module, "nvidia-smi") if p["nvidia_smi"] else None
    if smi:
        rc, text = run([smi, "-q"], timeout=60)
        if rc == 0:
            probe["ecc"] = parse_ecc(text)
        else:
            errors.append(
                f"nvidia-smi -q exited {rc}: {text.strip().splitlines()[0] if text.strip() else ''}"
            )
    probe["errors"] = errors
    module.exit_json(changed=False, probe=probe)


if __name__ == "__main__":
    main()
