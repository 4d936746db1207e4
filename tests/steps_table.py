#!/usr/bin/env python3
"""The per-step table `make test` prints at its end: each step's seconds, how many CPU vLLMs it started and
where its CPU went.

usage: python tests/steps_table.py STEPS.tsv DOCKER_EVENTS.jsonl [CPU.jsonl]
  STEPS.tsv: one line per step, "name<TAB>start<TAB>end<TAB>ok|FAILED" (epoch seconds; bin/test writes it)
  DOCKER_EVENTS.jsonl: `docker events --format '{{json .}}'` for container start/die over the whole run
  CPU.jsonl: tests/cpu_sampler.py's samples over the whole run

The CPU columns, in core-seconds over the step's time: busy (the whole machine, and its share of all
cores), vLLM (the containers of the vLLM image), nodes (every other container: the lab's and the
scenarios' hosts, where each Ansible task's module runs) and control (the rest: ansible-playbook and its
workers, pytest, dockerd). Steps side by side share the machine: each one's columns hold both.

A vLLM start is a container of the lab's vLLM image (its label io.vllm-fleet.cuda-version, kept by every
tag and image built from it) that ran at least MIN_SERVING_S, or still ran when its step ended: what
`vllm serve` costs, as opposed to the image's short runs (--help, download-kernels, cat): most of
make test's time goes on CPU vLLM starts.

Steps that ran side by side (bin/test's `begin`) are marked so; the "all steps" line counts their shared
time once (the wall time the steps covered) and each vLLM start once, whichever step it fell in.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

VLLM_LABEL = "io.vllm-fleet.cuda-version"
MIN_SERVING_S = 20.0


@dataclass(frozen=True)
class Step:
    name: str
    start: float
    end: float
    status: str


def read_steps(lines: Iterable[str]) -> list[Step]:
    steps = []
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 4:
            steps.append(Step(parts[0], float(parts[1]), float(parts[2]), parts[3]))
    return steps


@dataclass(frozen=True)
class CpuSample:
    when: float
    busy: float  # core-seconds the machine was busy since boot
    cores: int
    containers: dict[str, float]  # container id -> its core-seconds since it started


@dataclass(frozen=True)
class CpuUse:
    busy: float
    vllm: float
    nodes: float
    cores: int

    @property
    def control(self) -> float:
        return max(self.busy - self.vllm - self.nodes, 0.0)


def read_cpu_samples(lines: Iterable[str]) -> list[CpuSample]:
    samples = []
    for line in lines:
        try:
            raw = json.loads(line)
            samples.append(
                CpuSample(float(raw["t"]), float(raw["busy"]), int(raw["cores"]), raw["containers"])
            )
        except (ValueError, KeyError, TypeError):
            continue
    return sorted(samples, key=lambda s: s.when)


def vllm_events(lines: Iterable[str]) -> Iterator[dict]:
    """The docker events of the containers of the vLLM image."""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if VLLM_LABEL in ((event.get("Actor") or {}).get("Attributes") or {}):
            yield event


def vllm_ids(lines: Iterable[str]) -> set[str]:
    """The ids of every container of the vLLM image that started during the run."""
    return {event.get("id", "") for event in vllm_events(lines)}


def cpu_use(start: float, end: float, samples: list[CpuSample], vllm: set[str]) -> CpuUse | None:
    """The CPU spent between the first and the last sample within [start, end]; None with fewer than two."""
    within = [s for s in samples if start <= s.when <= end]
    if len(within) < 2:
        return None
    busy = vllm_s = nodes = 0.0
    for before, after in zip(within, within[1:], strict=False):
        busy += max(after.busy - before.busy, 0.0)
        for cid, seconds in after.containers.items():
            # a container that started between the two samples counts from zero
            spent = max(seconds - before.containers.get(cid, 0.0), 0.0)
            if cid in vllm:
                vllm_s += spent
            else:
                nodes += spent
    return CpuUse(busy, vllm_s, nodes, within[0].cores)


def vllm_runs(lines: Iterable[str]) -> list[tuple[float, float | None]]:
    """(start, die or None) of every container of the vLLM image, in the order they started."""
    started: dict[str, float] = {}
    runs: dict[str, tuple[float, float | None]] = {}
    for event in vllm_events(lines):
        cid, when = event.get("id", ""), event.get("timeNano", 0) / 1e9
        if event.get("status") == "start":
            started[cid] = when
            runs[f"{cid}@{when}"] = (when, None)
        elif event.get("status") == "die" and cid in started:
            runs[f"{cid}@{started[cid]}"] = (started[cid], when)
    return sorted(runs.values())


def serving_runs(step: Step, runs: list[tuple[float, float | None]]) -> set[tuple[float, float | None]]:
    """The serving vLLM runs that started within a step (see the module's docstring)."""
    found = set()
    for start, die in runs:
        if not step.start <= start <= step.end:
            continue
        lasted = (die if die is not None else step.end) - start
        if lasted >= MIN_SERVING_S or die is None or die > step.end:
            found.add((start, die))
    return found


def vllm_starts(step: Step, runs: list[tuple[float, float | None]]) -> int:
    """How many serving vLLMs started within a step."""
    return len(serving_runs(step, runs))


def wall_seconds(steps: list[Step]) -> float:
    """The time the steps covered, side-by-side stretches counted once."""
    covered, reach = 0.0, float("-inf")
    for step in sorted(steps, key=lambda s: s.start):
        if step.end > reach:
            covered += step.end - max(step.start, reach)
            reach = step.end
    return covered


def beside(step: Step, steps: list[Step]) -> bool:
    """Whether another step ran during this one."""
    return any(o is not step and o.start < step.end and step.start < o.end for o in steps)


def cpu_columns(use: CpuUse | None, seconds: float) -> str:
    if use is None:
        return f"{'':>15} {'':>6} {'':>6} {'':>7}"
    share = 100 * use.busy / (seconds * use.cores) if seconds > 0 else 0.0
    return f"{use.busy:>7.0f} ({share:>3.0f} %) {use.vllm:>6.0f} {use.nodes:>6.0f} {use.control:>7.0f}"


def table(
    steps: list[Step],
    runs: list[tuple[float, float | None]],
    samples: list[CpuSample] | None = None,
    vllm: set[str] | None = None,
) -> str:
    samples, vllm = samples or [], vllm or set()
    width = max([len(s.name) for s in steps] + [4])
    head = f" {'CPU s: busy':>15} {'vLLM':>6} {'nodes':>6} {'control':>7}" if samples else ""
    rows = [f"=== {'step':<{width}} {'seconds':>8} {'vLLM starts':>11}{head}  result"]
    for step in steps:
        seconds, starts = step.end - step.start, vllm_starts(step, runs)
        side = " (side by side)" if beside(step, steps) else ""
        cpu = " " + cpu_columns(cpu_use(step.start, step.end, samples, vllm), seconds) if samples else ""
        rows.append(f"=== {step.name:<{width}} {seconds:>8.0f} {starts:>11}{cpu}  {step.status}{side}")
    total_starts = len(set().union(*(serving_runs(s, runs) for s in steps)))
    wall = wall_seconds(steps)
    cpu = ""
    if samples and steps:
        use = cpu_use(min(s.start for s in steps), max(s.end for s in steps), samples, vllm)
        cpu = " " + cpu_columns(use, wall)
    rows.append(f"=== {'all steps':<{width}} {wall:>8.0f} {total_starts:>11}{cpu}".rstrip())
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    steps = read_steps(Path(argv[1]).read_text().splitlines())
    events = Path(argv[2])
    event_lines = events.read_text().splitlines() if events.exists() else []
    cpu = Path(argv[3]) if len(argv) == 4 else None
    samples = read_cpu_samples(cpu.read_text().splitlines()) if cpu and cpu.exists() else []
    print(table(steps, vllm_runs(event_lines), samples, vllm_ids(event_lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
