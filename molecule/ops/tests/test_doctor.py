"""playbooks/doctor.yml against the broken node of converge.yml: every fault found, with its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
HOST = "vf-ops-gpu1"


@pytest.fixture(scope="module")
def doctor():
    """Run the doctor once: (exit status, stdout, parsed JSON report)."""
    out = Path(tempfile.mkdtemp(prefix="vf-ops-doctor-"))
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(out / "facts"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
    )
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    proc = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            str(Path(inventory).parent),
            "playbooks/doctor.yml",
            "-e",
            f"fleet_doctor_report_dir={out}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads((out / "doctor.json").read_text())
    return proc.returncode, proc.stdout + proc.stderr, report


def find(report, check, status, subject_part=""):
    hits = [
        r
        for r in report["results"]
        if r["check"] == check
        and r["status"] == status
        and subject_part in r["subject"]
        and r["host"] in (HOST, "-")
    ]
    assert hits, f"no {status} {check} {subject_part!r}: " + json.dumps(
        [r for r in report["results"] if r["check"] == check], indent=1
    )
    return hits[0]


def test_doctor_fails_after_running_every_check(doctor):
    rc, out, report = doctor
    assert rc != 0, out[-2000:]
    assert "doctor: 4 check(s) failed" in out
    assert report["summary"]["fail"] == 4 and report["summary"]["ok"] is False
    checks = {r["check"] for r in report["results"]}
    assert {
        "disk_space",
        "host_ram",
        "shm_ipc",
        "port_free",
        "hf_access",
        "cuda_compat",
        "container_toolkit",
        "persistence_mode",
        "ecc",
        "mig",
        "topology_tp",
        "nvml_mismatch",
        "time_sync",
        "clock_skew",
    } <= checks


def test_too_little_disk_for_the_declared_model(doctor):
    _, out, report = doctor
    hit = find(report, "disk_space", "fail", "/srv/models")
    assert "huge-model 46566.1 GiB (safetensors index)" in hit["detail"]
    assert "point model_weights_root at a larger volume" in hit["fix"]
    assert f"fix: {hit['fix']}" in out


def test_container_without_ipc_host_and_small_shm(doctor):
    _, out, report = doctor
    hit = find(report, "shm_ipc", "fail", "vf-ops-mol-fakevllm")
    assert hit["subject"] == "container vf-ops-mol-fakevllm (model small)"
    assert "ipc=private and /dev/shm 64 MiB < 1024 MiB" in hit["detail"]
    assert "vllm_server_ipc_mode: host" in hit["fix"]
    assert f"fix: {hit['fix']}" in out


def test_port_in_use(doctor):
    _, out, report = doctor
    hit = find(report, "port_free", "fail", "port 8000")
    assert hit["subject"] == "port 8000 (vllm_server_models[small].port)"
    assert "python3 -m http.server 8000" in hit["detail"]
    assert "set vllm_server_models[small].port to a free port" in hit["fix"]
    assert f"fix: {hit['fix']}" in out


def test_gated_repo_the_token_cannot_read(doctor):
    _, out, report = doctor
    hit = find(report, "hf_access", "fail", "vf-ops/gated-model@main")
    assert "HTTP 403 with the token" in hit["detail"]
    assert "accept the model's licence at http://127.0.0.1:8990/vf-ops/gated-model" in hit["fix"]
    assert find(report, "hf_access", "pass", "vf-ops/huge-model@main")["detail"] == "HTTP 200 with the token"
    assert "vf-ops-not-granted" not in out  # the token never shows


@pytest.mark.parametrize(
    ("check", "status", "detail"),
    [
        ("nvml_mismatch", "pass", "driver 580.159.04, NVML matches"),
        ("persistence_mode", "pass", "enabled"),
        ("ecc", "pass", "enabled, no errors"),
        ("mig", "pass", "MIG disabled"),
        ("host_ram", "pass", "small 1.4 GiB"),
        ("topology_tp", "pass", "TP 1 (planned now)"),
        ("container_toolkit", "skip", "GPU requests are off"),
        ("time_sync", "skip", "runs in a container"),
    ],
)
def test_healthy_parts_pass_or_say_why_not(doctor, check, status, detail):
    _, _, report = doctor
    assert detail in find(report, check, status)["detail"]
