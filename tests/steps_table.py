#!/usr/bin/env python3
"""The per-step table `make test` prints at its end: each step's seconds and how many CPU vLLMs it started.

usage: python tests/steps_table.py STEPS.tsv DOCKER_EVENTS.jsonl
  STEPS.tsv: one line per step, "name<TAB>start<TAB>end<TAB>ok|FAILED" (epoch seconds; bin/test writes it)
  DOCKER_EVENTS.jsonl: `docker events --format '{{json .}}'` for container start/die over the whole run

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
from collections.abc import Iterable
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


def vllm_runs(lines: Iterable[str]) -> list[tuple[float, float | None]]:
    """(start, die or None) of every container of the vLLM image, in the order they started."""
    started: dict[str, float] = {}
    runs: dict[str, tuple[float, float | None]] = {}
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        attrs = (event.get("Actor") or {}).get("Attributes") or {}
        if VLLM_LABEL not in attrs:
            continue
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


def table(steps: list[Step], runs: list[tuple[float, float | None]]) -> str:
    width = max([len(s.name) for s in steps] + [4])
    rows = [f"=== {'step':<{width}} {'seconds':>8} {'vLLM starts':>11}  result"]
    for step in steps:
        seconds, starts = step.end - step.start, vllm_starts(step, runs)
        side = " (side by side)" if beside(step, steps) else ""
        rows.append(f"=== {step.name:<{width}} {seconds:>8.0f} {starts:>11}  {step.status}{side}")
    total_starts = len(set().union(*(serving_runs(s, runs) for s in steps)))
    rows.append(f"=== {'all steps':<{width}} {wall_seconds(steps):>8.0f} {total_starts:>11}")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    steps = read_steps(Path(argv[1]).read_text().splitlines())
    events = Path(argv[2])
    runs = vllm_runs(events.read_text().splitlines()) if events.exists() else []
    print(table(steps, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
