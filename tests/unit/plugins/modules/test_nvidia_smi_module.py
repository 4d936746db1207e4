"""The nvidia_gpu_facts module and the gpu_facts role, run against the nvidia-smi stand-in."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from nvidia_smi_profiles import PROFILES_DIR, ROOT, STANDIN, capture, load_profile, profile_names, run_module

pytest.importorskip("ansible.module_utils.basic")


def replay(profile: str, args: tuple[str, ...]) -> tuple[int | None, str, str]:
    """What the stand-in answers for ``args``, built from the profile's files."""
    invocation = " ".join(args)
    text = capture(profile, invocation)
    if text is None:
        return 2, "", f"nvidia-smi stand-in: profile '{profile}' has no capture for: nvidia-smi {invocation}"
    return (load_profile(profile).get("exit_codes") or {}).get(invocation, 0), text, ""


def expected_facts(profile: str) -> dict:
    """What the module must report, built straight from the profile's files."""
    results: dict[str, tuple[int | None, str, str]] = {}
    while (call := nvidia_smi.next_call(results)) is not None:
        results[call[0]] = replay(profile, call[1])
    return nvidia_smi.facts_from_results(results)


QUERY_PROFILES = [p for p in profile_names() if not load_profile(p)["failure"]]


@pytest.mark.parametrize("profile", QUERY_PROFILES)
def test_module_reports_what_the_captures_say(tmp_path: Path, profile: str) -> None:
    out = run_module(tmp_path, {"path": str(STANDIN)}, PROFILES_DIR / profile)
    assert out["changed"] is False and not out.get("failed")
    facts = out["ansible_facts"]["nvidia_gpu"]
    expected = json.loads(json.dumps(expected_facts(profile)))  # int keys -> str, as the module's JSON
    notes, expected_notes = facts.pop("notes"), expected.pop("notes")
    assert facts == expected
    assert len(notes) == len(expected_notes)
    for invocation in ("topo -m", "nvlink -s", " ".join(nvidia_smi.QUERY_ARGS)) if facts["present"] else ():
        missing = capture(profile, invocation) is None
        assert any(f"has no capture for: nvidia-smi {invocation}" in n for n in notes) is missing


@pytest.mark.parametrize(
    ("profile", "count", "interconnect", "cc_source"),
    [
        ("h200x1", 1, "none", "nvidia-smi"),
        ("h100x8", 8, "nvswitch", "product"),
        ("a100x8", 8, "nvswitch", "product"),
        ("rtx4090x8", 8, "pcie", "product"),
        ("rtx3090x2", 2, "unknown", "product"),
    ],
)
def test_module_highlights(
    tmp_path: Path, profile: str, count: int, interconnect: str, cc_source: str
) -> None:
    facts = run_module(tmp_path, {"path": str(STANDIN)}, PROFILES_DIR / profile)["ansible_facts"][
        "nvidia_gpu"
    ]
    assert (facts["present"], facts["state"], facts["count"]) == (True, "ok", count)
    assert facts["topology"]["interconnect"] == interconnect
    assert {g["compute_capability_source"] for g in facts["gpus"]} == {cc_source}


@pytest.mark.parametrize(
    ("profile", "state", "error_start", "library"),
    [
        (
            "nvml-mismatch",
            "nvml_mismatch",
            "Failed to initialize NVML: Driver/library version mismatch NVML library version: 535.161",
            "535.161",
        ),
        ("no-devices", "no_devices", "No devices were found", None),
        (
            "driver-not-loaded",
            "driver_not_loaded",
            "NVIDIA-SMI has failed because it couldn't communicate",
            None,
        ),
    ],
)
def test_module_failure_states_are_facts_not_failures(
    tmp_path: Path, profile: str, state: str, error_start: str, library: str | None
) -> None:
    out = run_module(tmp_path, {"path": str(STANDIN)}, PROFILES_DIR / profile)
    assert out["changed"] is False and not out.get("failed")
    facts = out["ansible_facts"]["nvidia_gpu"]
    assert (facts["present"], facts["state"], facts["count"], facts["gpus"]) == (False, state, 0, [])
    assert facts["nvml_mismatch"] is (state == "nvml_mismatch")
    assert facts["nvml_library_version"] == library
    assert facts["error"].startswith(error_start)
    assert load_profile(profile)["failure"]["mode"] == profile


def test_module_without_driver(tmp_path: Path) -> None:
    facts = run_module(tmp_path, {"path": str(tmp_path / "missing" / "nvidia-smi")})["ansible_facts"][
        "nvidia_gpu"
    ]
    assert (facts["present"], facts["state"], facts["nvml_mismatch"]) == (False, "no_driver", False)
    assert f"path={tmp_path / 'missing' / 'nvidia-smi'}" in facts["error"]


def test_module_finds_nvidia_smi_on_path(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").symlink_to(STANDIN)
    path_env = f"{bindir}:{os.environ.get('PATH', '')}"
    out = run_module(tmp_path, {}, PROFILES_DIR / "l40sx1", path_env=path_env)
    assert out["ansible_facts"]["nvidia_gpu"]["models"] == {"NVIDIA L40S": 1}


def test_module_in_check_mode_reports_the_same(tmp_path: Path) -> None:
    normal = run_module(tmp_path, {"path": str(STANDIN)}, PROFILES_DIR / "h100x8")
    check = run_module(tmp_path, {"path": str(STANDIN), "_ansible_check_mode": True}, PROFILES_DIR / "h100x8")
    assert check["changed"] is False and check["ansible_facts"] == normal["ansible_facts"]


def test_module_without_topology(tmp_path: Path) -> None:
    facts = run_module(tmp_path, {"path": str(STANDIN), "topology": False}, PROFILES_DIR / "h100x8")
    topology = facts["ansible_facts"]["nvidia_gpu"]["topology"]
    assert topology["source"] == "fabric" or topology["source"] is None
    assert topology["numa"] == {}


def test_module_reports_a_hung_nvidia_smi(tmp_path: Path) -> None:
    hung = tmp_path / "nvidia-smi"
    hung.write_text("#!/bin/sh\nsleep 30\n")
    hung.chmod(hung.stat().st_mode | stat.S_IXUSR)
    facts = run_module(tmp_path, {"path": str(hung), "timeout": 1})["ansible_facts"]["nvidia_gpu"]
    assert (facts["present"], facts["state"]) == (False, "timeout")


PLAYBOOK = """\
- name: Gather GPU facts on simulated hosts
  hosts: all
  gather_facts: false
  environment:
    NVIDIA_SMI_STANDIN_DIR: "{{ standin_dir }}"
  roles:
    - role: vllm_fleet.vllm_fleet.gpu_facts
  tasks:
    - name: Save the facts
      ansible.builtin.copy:
        content: "{{ ansible_facts.nvidia_gpu | to_json }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""


@pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="ansible-playbook not on PATH")
def test_role_through_ansible_playbook(tmp_path: Path) -> None:
    hosts = {
        "hgx": {"profile": "h100x8", "gpu_facts_required": True, "gpu_facts_expected_count": 8},
        "mismatch": {"profile": "nvml-mismatch", "gpu_facts_required": True},
        "short": {"profile": "h200x1", "gpu_facts_expected_count": 8},
        "cpu_only": {"profile": "no-devices"},
    }
    inventory = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "gpu_facts_nvidia_smi_path": str(STANDIN),
                "out_dir": str(tmp_path),
            },
            "hosts": {
                name: {"standin_dir": str(PROFILES_DIR / h["profile"])}
                | {k: v for k, v in h.items() if k != "profile"}
                for name, h in hosts.items()
            },
        }
    }
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "ansible.cfg").write_text(
        f"[defaults]\ncollections_path = {ROOT}/collections\ninject_facts_as_vars = false\nforks = 4\n"
    )
    env = {**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    result = subprocess.run(
        ["ansible-playbook", "-i", str(tmp_path / "inventory.json"), str(tmp_path / "play.yml")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 2, log  # two hosts are meant to fail
    hgx = json.loads((tmp_path / "hgx.json").read_text())
    assert (hgx["count"], hgx["topology"]["interconnect"]) == (8, "nvswitch")
    cpu_only = json.loads((tmp_path / "cpu_only.json").read_text())
    assert (cpu_only["present"], cpu_only["state"]) == (False, "no_devices")
    assert not (tmp_path / "mismatch.json").exists() and not (tmp_path / "short.json").exists()
    assert "mismatch has no usable NVIDIA GPU (state nvml_mismatch" in log
    assert "reboot the host" in log and "gpu_facts_required is true" in log
    assert "short reports 1 GPU(s)" in log and "but gpu_facts_expected_count is 8" in log
    assert "hgx                        : ok=" in log and "failed=0" in log.split("hgx ")[-1].splitlines()[0]
