"""playbooks/plan.yml on the example inventory: its JSON equals bin/vllm-fleet-plan's for the same inputs.

The example hosts do not exist: tests/lab/plan-example gives each GPU group the facts of a captured GPU
profile (nvidia_gpu_facts against the nvidia-smi stand-in) in a private fact cache, and plan.yml plans
from that cache. Every entry's recorded command line is then run and its JSON compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan-example")
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
    )
    proc = subprocess.run(
        [
            str(ROOT / "tests" / "lab" / "plan-example"),
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout


def test_plan_playbook_prints_the_table_without_contacting_hosts(example_run):
    _, stdout = example_run
    recap = [line for line in stdout.splitlines() if re.match(r"^\S+\s+: ok=", line)]
    assert recap and all("unreachable=0" in line and "failed=0" in line for line in recap)
    assert all(" changed=0" in line for line in recap if not line.startswith("localhost"))
    table = stdout[stdout.index("Plan per GPU group and model") :]
    for group, model, gpus in [
        ("rtx4090_nodes", "llama-3.1-70b-instruct-fp8", "8x NVIDIA GeForce RTX 4090 (24 GiB)"),
        ("h100_nodes", "llama-3.1-70b-instruct", "8x NVIDIA H100 80GB HBM3 (80 GiB)"),
    ]:
        row = next(line for line in table.splitlines() if line.split()[:2] == [group, model])
        assert gpus in row and row.rstrip().endswith("ok")
    # the serving group: one replica of Llama-3.1-405B FP8 over two 8xH100 hosts, TP 8 x PP 2
    row = next(
        line
        for line in table.splitlines()
        if line.split()[:2] == ["llama405b_nodes", "llama-3.1-405b-instruct-fp8"]
    )
    assert "8x NVIDIA H100 80GB HBM3 (80 GiB) x2 nodes" in row and row.rstrip().endswith("ok")
    tp, pp = row.split("x2 nodes", 1)[1].split()[:2]
    assert (tp, pp) == ("8", "2"), row


def test_plan_json_equals_the_planner_command(example_run):
    out, _ = example_run
    report = json.loads((out / "plan.json").read_text())
    planned = [e for e in report["entries"] if e["plan"]]
    assert {e["group"] for e in planned} >= {"h100_nodes", "rtx4090_nodes"}
    for entry in report["entries"]:
        if not entry["plan"]:  # only a group the example inventory does not have (yet) may lack a plan
            assert entry["error"].startswith(f"group {entry['group']} has no hosts in this inventory"), entry
    for entry in planned:
        assert entry["facts_source"] == "cache"
        proc = subprocess.run(entry["command"], cwd=ROOT, capture_output=True, text=True, check=False)
        assert proc.returncode == (0 if entry["plan"]["feasible"] else 2), proc.stderr
        assert json.loads(proc.stdout) == entry["plan"], (entry["group"], entry["model"])
    fp8 = next(e for e in planned if e["model"] == "llama-3.1-70b-instruct-fp8")
    assert fp8["plan"]["tensor_parallel_size"] > 1  # 70B at FP8 does not fit one 24 GiB card
    # the serving group is planned as one replica over both its hosts: a pipeline stage per host
    group = next(e for e in planned if e["group"] == "llama405b_nodes")
    assert group["model"] == "llama-3.1-405b-instruct-fp8"
    assert group["hosts"] == ["gpu-h100-05.dc1.example.com", "gpu-h100-06.dc1.example.com"]
    assert group["gpu"]["nodes"] == 2 and group["gpu"]["count"] == 8
    assert "--nodes" in group["command"] and group["command"][group["command"].index("--nodes") + 1] == "2"
    plan = group["plan"]
    assert plan["feasible"] and plan["quantization"] == "fp8"
    assert (plan["tensor_parallel_size"], plan["pipeline_parallel_size"]) == (8, 2)


@pytest.mark.parametrize("allow", [False, True])
def test_an_infeasible_plan_fails_the_play_unless_allowed(tmp_path, allow):
    # one RTX 4090 cannot hold a 70B model, even in FP8: that row is INFEASIBLE
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
    )
    extra = ["--", "-e", "fleet_plan_allow_infeasible=true"] if allow else []
    proc = subprocess.run(
        [str(ROOT / "tests" / "lab" / "plan-example"), str(tmp_path), "rtx4090_nodes=l4x1", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = proc.stdout + proc.stderr
    row = next(
        line
        for line in out.splitlines()
        if line.split()[:2] == ["rtx4090_nodes", "llama-3.1-70b-instruct-fp8"]
    )
    assert "INFEASIBLE" in row
    if allow:
        assert proc.returncode == 0, out[-3000:]
    else:
        assert proc.returncode != 0
        assert "infeasible plan(s)" in out and "fleet_plan_allow_infeasible: true" in out
