#!/usr/bin/env python3
"""What recording a deployment costs the controller: `vllm_serving_update_fact` as vllm_server's record
task calls it, through a real `ansible-playbook`, against a baseline in the same run.

The records handed to the filter are ansible-core's lazy containers, as on a real host (the lab's record of
two models, read from tests/data). The baseline is what the filter did before: `copy.deepcopy` of those
containers, which copies the template engine and every variable of the host with each nested dict and
list. It lives here only, as a filter plugin beside the generated playbook. The host has as many variables
as --vars says (an inventory host carries hundreds: group_vars, role defaults, facts).

Prints the seconds of each run (the fastest of --repeat), and the ratio of the filter to the baseline.
Usage: eval "$(bin/bootstrap)"; python benchmarks/record_fact_bench.py [--calls 30] [--vars 400]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "data" / "record-fact" / "lab-gpu2.fact.json"

BASELINE_FILTER = '''
import copy

from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy


def deepcopy_then_update(existing, records, now, prune=True, earlier=None):
    """The filter as it was: every input deep-copied as the template handed it over."""
    return deploy.update_deployments(copy.deepcopy(existing), copy.deepcopy(records), now, prune, earlier)


class FilterModule:
    def filters(self):
        return {"baseline_update_fact": deepcopy_then_update}
'''

PLAY = """- name: Record a deployment {calls} times
  hosts: localhost
  gather_facts: false
  vars_files: [vars.yml]
  tasks:
    - name: Build the new fact as the record task does
      ansible.builtin.set_fact:
        bench_fact: "{{{{ bench_old | {filter}(bench_records, '2026-12-07T00:00:00Z') }}}}"
      loop: "{{{{ range({calls}) | list }}}}"
"""


def run(workdir: Path, filter_name: str, calls: int) -> float:
    (workdir / "play.yml").write_text(PLAY.format(calls=calls, filter=filter_name))
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
        "ANSIBLE_FILTER_PLUGINS": str(workdir / "filter_plugins"),
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
    }
    start = time.perf_counter()
    done = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", "play.yml"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{filter_name}: ansible-playbook failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=30, help="record tasks per run (default 30)")
    parser.add_argument("--vars", type=int, default=400, help="variables of the host (default 400)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the fastest kept (default 3)")
    args = parser.parse_args()

    fact = json.loads(RECORD.read_text())
    records = {name: entry["current"] for name, entry in fact["models"].items()}
    with tempfile.TemporaryDirectory(prefix="vf-record-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "filter_plugins").mkdir()
        (workdir / "filter_plugins" / "baseline_update_fact.py").write_text(BASELINE_FILTER)
        # the host's other variables: as many as asked, each a small nested value like a role default
        extra = {f"bench_var_{i}": {"name": f"v{i}", "items": [i, {"k": str(i)}]} for i in range(args.vars)}
        (workdir / "vars.yml").write_text(
            json.dumps({"bench_old": fact, "bench_records": records, **extra}, indent=1)
        )
        timings = {}
        for name in ("vllm_fleet.vllm_fleet.vllm_serving_update_fact", "baseline_update_fact"):
            timings[name] = min(run(workdir, name, args.calls) for _ in range(args.repeat))
    ours, base = timings.values()
    print(f"{args.calls} record tasks, a host with {args.vars} variables, fastest of {args.repeat} runs:")
    print(f"  vllm_serving_update_fact (plain copies) {ours:7.2f} s")
    print(f"  baseline (deepcopy of the lazy inputs)  {base:7.2f} s")
    print(f"  ratio {ours / base:.2f}x the baseline ({base / ours:.1f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
