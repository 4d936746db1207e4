#!/usr/bin/env python3
"""Where make test's CPU goes: the machine's busy CPU time and each Docker container's, sampled until killed.

usage: python tests/cpu_sampler.py OUT.jsonl [--every SECONDS]

Each line: {"t": epoch, "busy": core-seconds the machine was busy since boot, "cores": n,
"containers": {container id: its core-seconds since it started}}. tests/steps_table.py turns the lines into
each step's CPU use: all of it, the vLLM containers', the other containers' (lab and molecule nodes: the
target side of every Ansible task) and the rest (the controller: ansible-playbook, pytest, dockerd).
Reads /proc/stat and the containers' cgroups (v1 cpuacct or v2 cpu.stat, cgroupfs or systemd layout);
a machine without them gets the busy time alone. The kernel keeps these counters; nothing else does, so
this reads them directly.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
# cgroup v1 (cpuacct.usage, in ns) and v2 (cpu.stat usage_usec), with Docker's cgroupfs or systemd driver
V1_GLOBS = ("cpuacct/docker/*/cpuacct.usage", "cpuacct/system.slice/docker-*.scope/cpuacct.usage")
V2_GLOBS = ("docker/*/cpu.stat", "system.slice/docker-*.scope/cpu.stat")


def busy_seconds(stat: str, ticks_per_second: int) -> float:
    """Core-seconds the machine spent busy since boot, from /proc/stat's first line (idle and iowait not)."""
    fields = [int(v) for v in stat.splitlines()[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields + [0] * (8 - len(fields))
    return (user + nice + system + irq + softirq + steal) / ticks_per_second


def container_id(path: Path) -> str:
    """The container id of a cgroup file: its folder's name, without the systemd scope's wrapping."""
    name = path.parent.name
    return name.removeprefix("docker-").removesuffix(".scope")


def container_seconds(root: Path = CGROUP) -> dict[str, float]:
    """Each running container's CPU core-seconds since it started."""
    found: dict[str, float] = {}
    for pattern in V1_GLOBS:
        for path in root.glob(pattern):
            try:
                found[container_id(path)] = int(path.read_text()) / 1e9
            except (OSError, ValueError):
                continue  # the container ended between the glob and the read
    for pattern in V2_GLOBS:
        for path in root.glob(pattern):
            try:
                usage = next(line for line in path.read_text().splitlines() if line.startswith("usage_usec "))
                found[container_id(path)] = int(usage.split()[1]) / 1e6
            except (OSError, ValueError, StopIteration):
                continue
    return found


def sample(when: float, stat: str, ticks_per_second: int, cores: int, root: Path = CGROUP) -> dict:
    return {
        "t": round(when, 3),
        "busy": round(busy_seconds(stat, ticks_per_second), 2),
        "cores": cores,
        "containers": {cid: round(s, 3) for cid, s in container_seconds(root).items()},
    }


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--every"):
        print(__doc__, file=sys.stderr)
        return 2
    every = float(argv[3]) if len(argv) == 4 else 5.0
    ticks, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    with open(argv[1], "a", encoding="utf-8") as out:
        while True:
            line = sample(time.time(), Path("/proc/stat").read_text(), ticks, cores)
            out.write(json.dumps(line) + "\n")
            out.flush()
            time.sleep(every)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
