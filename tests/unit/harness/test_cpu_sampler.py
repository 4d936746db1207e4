"""make test's CPU samples (tests/cpu_sampler.py): the machine's busy time and each container's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

PATH = Path(__file__).parents[2] / "cpu_sampler.py"
SPEC = importlib.util.spec_from_file_location("cpu_sampler", PATH)
cpu_sampler = importlib.util.module_from_spec(SPEC)
sys.modules["cpu_sampler"] = cpu_sampler
SPEC.loader.exec_module(cpu_sampler)

STAT = "cpu  1000 20 300 9000 50 7 3 10 0 0\ncpu0 500 10 150 4500 25 3 2 5 0 0\n"
ID1, ID2 = "a" * 64, "b" * 64


def test_busy_time_is_everything_but_idle_and_iowait() -> None:
    assert cpu_sampler.busy_seconds(STAT, 100) == (1000 + 20 + 300 + 7 + 3 + 10) / 100


def test_each_container_from_cgroup_v1_and_v2_layouts(tmp_path: Path) -> None:
    v1 = tmp_path / "cpuacct" / "docker" / ID1
    v1.mkdir(parents=True)
    (v1 / "cpuacct.usage").write_text("2500000000\n")  # nanoseconds
    v2 = tmp_path / "system.slice" / f"docker-{ID2}.scope"
    v2.mkdir(parents=True)
    (v2 / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert cpu_sampler.container_seconds(tmp_path) == {ID1: 2.5, ID2: 1.5}
    line = cpu_sampler.sample(12.0, STAT, 100, 2, tmp_path)
    assert line == {"t": 12.0, "busy": 13.4, "cores": 2, "containers": {ID1: 2.5, ID2: 1.5}}


def test_the_sampler_writes_a_line_at_once_and_runs_until_killed(tmp_path: Path) -> None:
    out = tmp_path / "cpu.jsonl"
    proc = subprocess.Popen([sys.executable, str(PATH), str(out), "--every", "0.2"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(out.read_text().splitlines() if out.exists() else []) < 2:
            time.sleep(0.1)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    first, second = (json.loads(line) for line in out.read_text().splitlines()[:2])
    assert second["t"] > first["t"] and second["busy"] >= first["busy"] > 0
    assert first["cores"] >= 1 and isinstance(first["containers"], dict)


def test_a_wrong_call_prints_the_usage() -> None:
    proc = subprocess.run([sys.executable, str(PATH)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "usage: python tests/cpu_sampler.py" in proc.stderr
