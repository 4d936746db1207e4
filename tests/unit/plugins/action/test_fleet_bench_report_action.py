"""The vllm_fleet_bench_report action: the report is written on the control node from a play."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT / "tests" / "data" / "vllm-bench" / "cpu-tiny"

PLAY = """\
- name: Report a recorded sweep
  hosts: somewhere
  gather_facts: false
  tasks:
    - name: Write the report
      vllm_fleet.vllm_fleet.vllm_fleet_bench_report:
        run_json: "{{ run_json }}"
        name: "{{ report_name | default('report') }}"
      register: written
    - name: Show it
      ansible.builtin.debug:
        var: written
"""


def run_play(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "play.yml").write_text(PLAY)
    # the host is never contacted: an action that runs on the control node needs no connection
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    somewhere:\n      ansible_host: 192.0.2.1\n")
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(
        ["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=300,
    )


@pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="ansible-playbook not on PATH")
def test_action_writes_the_report_on_the_control_node(tmp_path: Path) -> None:
    steps = [
        {
            "load": int(re.search(r"-(\d+)\.log$", p.name).group(1)),
            "rc": 0,
            "output": p.read_text(),
            "elapsed_s": 10.0,
        }
        for p in sorted(DATA.glob("concurrency-*.log"))
    ]
    run = {"settings": {"mode": "concurrency", "knee_factor": 3, "model": "tiny"}, "steps": steps}
    (tmp_path / "run.json").write_text(json.dumps(run))
    proc = run_play(tmp_path, "-e", f"run_json={tmp_path / 'run.json'}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Knee at concurrency 8:" in proc.stdout
    assert json.loads((tmp_path / "report.json").read_text())["knee"]["load"] == 8
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="ansible-playbook not on PATH")
def test_action_fails_naming_the_bad_input(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("[]")
    proc = run_play(tmp_path, "-e", f"run_json={tmp_path / 'run.json'}")
    assert proc.returncode == 2
    assert (
        "vllm_fleet_bench_report:" in proc.stdout and "expected an object with a 'steps' list" in proc.stdout
    )
    assert not (tmp_path / "report.png").exists()
