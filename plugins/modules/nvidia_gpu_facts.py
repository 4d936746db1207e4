#!/usr/bin/python
# Copyright: vllm-fleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: NVIDIA GPU facts from nvidia-smi."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_facts
short_description: Gather NVIDIA GPU, driver and topology facts with nvidia-smi
description:
  - Runs C(nvidia-smi -q), C(nvidia-smi --query-gpu=...), C(nvidia-smi topo -m) and
    C(nvidia-smi nvlink -s) and returns the GPUs, the driver, the highest CUDA version the
    driver supports and how the GPUs are linked as C(ansible_facts.nvidia_gpu).
  - Never changes anything on the host. A host without the driver or without GPUs gets facts
    that say so (C(present=false) and a C(state)); the module does not fail for them.
  - A kernel module that does not match the userspace library (driver upgraded without a
    reboot) is reported as C(nvml_mismatch=true) with NVIDIA's message.
  - When C(nvidia-smi -q) prints no report (old driver, broken C(-q)), the GPUs are read from
    the next form that answers, C(nvidia-smi -q -x), C(--query-gpu) CSV, the plain C(nvidia-smi)
    table, then C(nvidia-smi -L); C(source) says which, C(notes) why. Later forms fill in what
    that one lacks (the table the CUDA version, C(-L) full names and UUIDs).
  - C(nvidia-smi -L) is also run when there are MIG devices, since only it names their profiles and
    MIG UUIDs.
  - Compute capability is what C(--query-gpu=compute_cap) reports (asked again without that field
    on drivers before 510, which refuse it), else the product name's
    (C(compute_capability_source)).
  - When the other commands fail the facts say so in C(notes) and fall back (links from the
    NVSwitch fabric state or the product's lack of NVLink).
  - C(warnings) lists what nvidia-smi warns about among its data (a corrupted infoROM) and
    inactive NVLink links of a GPU whose other links are up.
version_added: "1.0.0"
author: vllm-fleet maintainers (@vllm-fleet)
options:
  path:
    description:
      - Path of the C(nvidia-smi) executable.
      - When omitted, C(nvidia-smi) is looked up on C(PATH) and in C(/usr/bin),
        C(/usr/local/bin) and C(/usr/local/nvidia/bin).
    type: path
  timeout:
    description:
      - Seconds to wait for each C(nvidia-smi) call. A call that does not answer in time
        (hung driver, GPU fallen off the bus) gives C(state=timeout).
    type: int
    default: 60
  topology:
    description:
      - Also run C(nvidia-smi topo -m) and C(nvidia-smi nvlink -s) to report links between
        GPUs and NUMA affinity.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads only; the same facts in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
  facts:
    support: full
    description: Sets C(ansible_facts.nvidia_gpu).
notes:
  - GPU indices are nvidia-smi's (PCI bus order), which is also the order of
    C(CUDA_DEVICE_ORDER=PCI_BUS_ID).
"""

EXAMPLES = r"""
- name: Gather GPU facts
  nvidia_gpu_facts:

- name: Show the GPUs
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia_gpu.count }} x {{ ansible_facts.nvidia_gpu.models }}"

- name: Use a driver installed outside PATH, without topology
  nvidia_gpu_facts:
    path: /opt/nvidia/bin/nvidia-smi
    topology: false
"""

RETURN = r"""
ansible_facts:
  description: Facts added to C(ansible_facts).
  returned: always
  type: dict
  contains:
    nvidia_gpu:
      description: GPUs, driver and topology of the host.
      returned: always
      type: dict
      contains:
        present:
          description: At least one GPU answered.
          type: bool
        state:
          description: >-
            C(ok), C(no_driver) (no nvidia-smi), C(no_devices), C(nvml_mismatch),
            C(driver_not_loaded), C(nvml_missing), C(timeout) or C(error).
          type: str
        count:
          description: Number of GPUs.
          type: int
        driver_version:
          description: Driver version as nvidia-smi reports it.
          type: str
          sample: "580.159.04"
        cuda_version:
          description: Highest CUDA version the driver supports.
          type: str
          sample: "13.0"
        kernel_module_version:
          description: Version of the loaded kernel module (/proc/driver/nvidia/version), if readable.
          type: str
        nvml_mismatch:
          description: The kernel module and the userspace NVML library differ.
          type: bool
        nvml_library_version:
          description: Userspace NVML version named in a mismatch message.
          type: str
        error:
          description: >-
            Why no GPU facts could be read, in NVIDIA's or the module's words; null when
            C(state=ok).
          type: str
        source:
          description: >-
            The nvidia-smi form the GPUs were read from - C(query) (C(-q)), C(query_xml)
            (C(-q -x)), C(query_gpu) (C(--query-gpu) CSV), C(table) (plain C(nvidia-smi)) or
            C(list) (C(-L)); null when no GPU was read.
          type: str
          sample: query
        gpus:
          description: >-
            One entry per GPU with index, uuid, name, architecture, pci_bus_id,
            memory_total_mib, memory_reserved_mib (framebuffer the driver keeps; CUDA sees total minus
            this), compute_capability, compute_capability_source
            (C(nvidia-smi) when C(--query-gpu) reported it, C(product) when taken from the product
            name), persistence_mode, mig_mode (enabled, disabled, null when unsupported),
            mig_mode_pending, mig_devices (index, gpu_instance_id, compute_instance_id,
            memory_total_mib, multiprocessor_count, profile and uuid from C(-L)), mig_instances
            (one per MIG GPU instance - gpu_instance_id, profile, memory_total_mib counted once
            however many compute instances share it, multiprocessor_count, devices, uuids),
            minor_number, fabric_state, fabric_clique_id, numa_node and cpu_affinity. Forms other
            than C(-q) leave what they do not print null (the table has no uuid, C(-L) no memory).
          type: list
          elements: dict
        models:
          description: Number of GPUs per product name.
          type: dict
          sample: {"NVIDIA H100 80GB HBM3": 8}
        homogeneous:
          description: All GPUs are the same product.
          type: bool
        topology:
          description: >-
            source (C(topo), C(fabric), C(product) or null), interconnect (C(nvswitch),
            C(nvlink), C(mixed), C(pcie), C(none) for one GPU, C(unknown)), nvswitch (bool),
            links (one per GPU pair - gpus, kind C(nvswitch)/C(nvlink)/C(pcie), nvlinks,
            path as topo -m prints it), nvlink_islands (GPU groups joined by NVLink), numa
            (GPU index to NUMA node) and numa_nodes (NUMA node to GPU indices).
          type: dict
        notes:
          description: What could not be read and which fallback was used.
          type: list
          elements: str
        warnings:
          description: >-
            What nvidia-smi warned about among its data (C(infoROM is corrupted at gpu ...)) and
            degraded NVLink (inactive links next to active ones, or all links down).
          type: list
          elements: str
"""

import os
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils.nvidia_smi import (
    STATE_NO_DRIVER,
    empty_facts,
    facts_from_results,
    next_call,
    parse_proc_version,
)

PROC_VERSION = "/proc/driver/nvidia/version"


def _run(binary: str, args: tuple[str, ...], timeout: int) -> tuple[int | None, str, str]:
    try:
        proc = subprocess.run(
            [binary, *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, "", ""
    except OSError as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def _kernel_module_version() -> str | None:
    try:
        with open(PROC_VERSION, encoding="utf-8", errors="replace") as handle:
            return parse_proc_version(handle.read())
    except OSError:
        return None


def gather(binary: str | None, timeout: int, topology: bool) -> dict:
    kernel = _kernel_module_version()
    if not binary:
        facts = empty_facts(
            STATE_NO_DRIVER, "nvidia-smi not found: the NVIDIA driver is not installed on this host"
        )
        facts["kernel_module_version"] = kernel
        return facts
    results: dict[str, tuple[int | None, str, str]] = {}
    while (call := next_call(results, topology)) is not None:
        key, args = call
        results[key] = _run(binary, args, timeout)
    return facts_from_results(results, kernel_module_version=kernel)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path"},
            "timeout": {"type": "int", "default": 60},
            "topology": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    if path:
        binary = path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    else:
        binary = module.get_bin_path(
            "nvidia-smi", opt_dirs=["/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin"]
        )
    facts = gather(binary, module.params["timeout"], module.params["topology"])
    if binary is None and path:
        facts["error"] = (
            f"no executable nvidia-smi at path={path} (driver not installed, or a wrong path option)"
        )
    module.exit_json(changed=False, ansible_facts={"nvidia_gpu": facts})


if __name__ == "__main__":
    main()
