"""Real hardware: what the facts module reported on an H200 host equals the parse of that host's captures.

tests/data/nvidia-smi/h200x1-device/ holds the nvidia-smi outputs and the module's own result
(facts.json, written by tests/hardware/gpu-facts.yml in the same run); see its SOURCE.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from nvidia_smi_profiles import PROFILES_DIR, ROOT, STANDIN, capture, run_module

PROFILE = "h200x1-device"
DEVICE = PROFILES_DIR / PROFILE
HOST_STATE = ROOT / "tests" / "data" / "host-state" / "h200-device"


def _reported() -> dict:
    return json.loads((DEVICE / "facts.json").read_text())


def _from_captures() -> dict:
    """The facts the module's calls (nvidia_smi.next_call) give when answered from the captures."""

    def result(args: tuple[str, ...]) -> tuple[int, str, str]:
        text = capture(PROFILE, " ".join(args))
        assert text is not None, args
        return 0, text, ""

    kernel = nvidia_smi.parse_proc_version((HOST_STATE / "proc-driver-nvidia-version.txt").read_text())
    results: dict[str, tuple[int | None, str, str]] = {}
    while (call := nvidia_smi.next_call(results)) is not None:
        results[call[0]] = result(call[1])
    assert list(results) == ["query", "query_gpu", "topo", "nvlink"]
    return json.loads(json.dumps(nvidia_smi.facts_from_results(results, kernel_module_version=kernel)))


# Facts this version reports that the module run recorded in facts.json (2026-12-04) predates.
# A fresh tests/hardware/capture.sh run on the host makes this set empty.
NEWER_THAN_THE_CAPTURE: set[str] = set()


def _as_recorded(facts: dict) -> tuple[dict, set[str]]:
    """``facts`` without the keys facts.json lacks, and the names of the keys left out."""
    reported = _reported()
    dropped = {k for k in facts if k not in reported}
    trimmed = {k: v for k, v in facts.items() if k in reported}
    gpus = []
    for gpu, recorded in zip(trimmed.get("gpus", []), reported.get("gpus", []), strict=True):
        dropped |= {f"gpus[].{k}" for k in gpu if k not in recorded}
        gpus.append({k: v for k, v in gpu.items() if k in recorded})
    trimmed["gpus"] = gpus
    return trimmed, dropped


def test_parse_of_the_captures_equals_what_the_module_reported_on_the_host() -> None:
    facts, newer = _as_recorded(_from_captures())
    assert facts == _reported()
    assert newer in (set(), NEWER_THAN_THE_CAPTURE)
    parsed = _from_captures()
    # What the newer keys say of this host: read from -q, nothing to warn about, no MIG.
    assert (parsed["source"], parsed["warnings"], parsed["gpus"][0]["mig_instances"]) == ("query", [], [])


def test_the_h200_host() -> None:
    facts = _reported()
    assert (facts["present"], facts["state"], facts["error"], facts["notes"]) == (True, "ok", None, [])
    assert (facts["count"], facts["models"], facts["homogeneous"]) == (1, {"NVIDIA H200": 1}, True)
    assert (facts["driver_version"], facts["cuda_version"], facts["kernel_module_version"]) == (
        "580.159.04",
        "13.0",
        "580.159.04",
    )
    assert facts["nvml_mismatch"] is False
    (gpu,) = facts["gpus"]
    assert (gpu["index"], gpu["name"], gpu["architecture"], gpu["pci_bus_id"]) == (
        0,
        "NVIDIA H200",
        "Hopper",
        "00000000:00:06.0",
    )
    assert (gpu["memory_total_mib"], gpu["memory_reserved_mib"]) == (143771, 616)
    assert (gpu["compute_capability"], gpu["compute_capability_source"]) == ("9.0", "nvidia-smi")
    assert (gpu["persistence_mode"], gpu["mig_mode"], gpu["mig_devices"]) == (True, "disabled", [])
    assert (gpu["numa_node"], gpu["cpu_affinity"]) == (0, "0-15")
    assert gpu["uuid"] == "GPU-a531e98e-626b-06a7-ead8-5cb43aa496b5"
    topology = facts["topology"]
    assert (topology["source"], topology["interconnect"], topology["nvswitch"]) == ("topo", "none", False)
    assert (topology["links"], topology["nvlink_islands"]) == ([], [[0]])
    assert (topology["numa"], topology["numa_nodes"]) == ({"0": 0}, {"0": [0]})


def test_the_host_agrees_with_itself_across_formats() -> None:
    """-q, -q -x, the CSV query, -L and --version of the same host name the same GPU and driver."""
    text = nvidia_smi.parse_query(capture(PROFILE, "-q") or "")
    assert nvidia_smi.parse_query_xml(capture(PROFILE, "-q -x") or "") == text
    (row,) = nvidia_smi.parse_query_gpu_csv(capture(PROFILE, " ".join(nvidia_smi.QUERY_ARGS)) or "")
    gpu = text["gpus"][0]
    assert (row["uuid"], row["pci.bus_id"], int(row["memory.total"] or 0)) == (
        gpu["uuid"],
        gpu["pci_bus_id"],
        gpu["memory_total_mib"],
    )
    assert row["driver_version"] == text["driver_version"]
    (listed,) = nvidia_smi.parse_list_gpus(capture(PROFILE, "-L") or "")
    assert (listed["name"], listed["uuid"]) == (gpu["name"], gpu["uuid"])
    version = capture(PROFILE, "--version") or ""
    assert re.search(r"DRIVER version\s*: 580\.159\.04", version) and re.search(
        r"CUDA Version\s*: 13\.0", version
    )


def test_the_playbook_run_changed_nothing_but_its_report_file() -> None:
    run = (DEVICE / "ansible-run.txt").read_text()
    check = (DEVICE / "ansible-check.txt").read_text()
    assert re.search(r"localhost\s+: ok=6\s+changed=1\s+unreachable=0\s+failed=0", run)
    assert "changed: [localhost]" in run.split("TASK [Save the GPU facts]")[1]
    assert run.split("TASK [Save the GPU facts]")[0].count("changed: [localhost]") == 0
    assert re.search(r"localhost\s+: ok=6\s+changed=0\s+unreachable=0\s+failed=0", check)
    assert "ansible-playbook [core 2.19.14]" in (DEVICE / "ansible-version.txt").read_text()


def test_stand_in_replay_of_the_host_gives_the_hosts_facts(tmp_path: Path) -> None:
    """A lab host given this profile reports what the real host reported (except the kernel module,
    which the module reads from /proc of the host it runs on)."""
    pytest.importorskip("ansible.module_utils.basic")
    facts = run_module(tmp_path, {"path": str(STANDIN)}, DEVICE)["ansible_facts"]["nvidia_gpu"]
    expected = _reported()
    expected["kernel_module_version"] = facts["kernel_module_version"]
    trimmed, newer = _as_recorded(facts)
    assert trimmed == expected
    assert newer in (set(), NEWER_THAN_THE_CAPTURE)
