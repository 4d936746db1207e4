#!/usr/bin/env python3
"""What loading the collection's filter plugins costs an Ansible worker, against a baseline in the same run.

Each Ansible worker process imports the filter plugins its tasks' templates name, after ansible-core's own
modules (the plugin loader and the template engine, imported here first and not counted). Each filter of
plugins/filter/ is imported in a fresh `python -X importtime` process and its cumulative import time read;
then all of them in one process (a worker whose tasks use every filter, each module paid once). The baseline
is the same imports from --baseline's plugins/ (`git archive`, into a temporary collection): by default the
last commit whose `fleet_*` packages imported every submodule in their `__init__`.

Then a real `ansible-playbook` against each: --hosts local hosts, three tasks whose templates call
`vllm_fleet_var`, `fleet_monitoring_dcgm_hosts` and `fleet_rollout_counters_delta` as the roles do, so each
host's task runs in its own worker that loads the filter (forks as many as hosts); and against the
collection now once more with the play's hosts pattern through `vllm_fleet_preload`, as the collection's
playbooks have it: the filters loaded once in the controller, which each worker inherits.

Prints the filters that cost most in the baseline (the fastest of --repeat processes each, in ms), the sum
over every filter and the all-in-one import, the playbook's seconds and CPU seconds, and the ratios.
Usage: eval "$(bin/bootstrap)"; python benchmarks/filter_import_bench.py [--repeat 3] [--top 15] [--hosts 20]
"""

from __future__ import annotations

import argparse
import compileall
import io
import os
import re
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "ansible_collections.vllm_fleet.vllm_fleet"
BASELINE = "1dedf05"  # before the lazy `fleet_*` package imports (#30)
# what a worker has imported before it loads a filter plugin
PRELOADED = "import ansible.plugins.loader, ansible.template"
_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$")
PLAY = """- name: Filters as the roles call them, one worker per host and task
  hosts: {hosts}
  gather_facts: false
  tasks:
    - name: A role's variable
      ansible.builtin.set_fact:
        bench_image: "{{{{ hostvars[inventory_hostname]
          | vllm_fleet.vllm_fleet.vllm_fleet_var('vllm_server_image') }}}}"
    - name: The hosts that run the DCGM exporter
      ansible.builtin.set_fact:
        bench_dcgm: "{{{{ groups['bench'] | vllm_fleet.vllm_fleet.fleet_monitoring_dcgm_hosts(hostvars) }}}}"
    - name: A soak window's counters
      ansible.builtin.set_fact:
        bench_delta: "{{{{ {{}} | vllm_fleet.vllm_fleet.fleet_rollout_counters_delta({{}}) }}}}"
"""
# the collection's playbooks: the filters loaded in the controller by the hosts pattern
PRELOADED_HOSTS = "\"{{ 'bench' | vllm_fleet.vllm_fleet.vllm_fleet_preload }}\""


def collection_at(rev: str, into: Path) -> Path:
    """A directory holding the collection's plugins as of `rev`, with the roles whose defaults
    `vllm_fleet_var` reads."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "plugins", "meta", "roles"],
        capture_output=True,
        check=True,
    ).stdout
    target = into / "ansible_collections" / "vllm_fleet" / "vllm_fleet"
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return into


def import_us(root: Path, modules: list[str]) -> int:
    """Cumulative import time (µs) of `modules` in a fresh process with `root` first on sys.path."""
    code = f"{PRELOADED}\nimport sys\nsys.path.insert(0, {str(root)!r})\n" + "".join(
        f"import {m}\n" for m in modules
    )
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"importing {modules[0]}{' ...' if len(modules) > 1 else ''} failed:\n{done.stderr[-2000:]}")
    # a module's line comes once, at its first import; a filter another filter imported counts nothing
    wanted = set(modules)
    return sum(int(m[1]) for line in done.stderr.splitlines() if (m := _LINE.match(line)) and m[2] in wanted)


def playbook(root: Path, workdir: Path, hosts: int, pattern: str = "bench") -> tuple[float, float]:
    """Seconds and CPU seconds (every process) of the play against the collection under `root`."""
    (workdir / "play.yml").write_text(PLAY.format(hosts=pattern))
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(root),
        "ANSIBLE_FORKS": str(hosts),
        "ANSIBLE_LOCALHOST_WARNING": "false",
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        ["ansible-playbook", "-i", "inventory.ini", "play.yml"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"ansible-playbook against {root} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def filters(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / PACKAGE.replace(".", "/") / "plugins" / "filter").glob("*.py"))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", default=BASELINE, help=f"commit of the baseline (default {BASELINE})")
    parser.add_argument(
        "--repeat", type=int, default=3, help="processes per import, fastest kept (default 3)"
    )
    parser.add_argument("--top", type=int, default=15, help="filters listed (default 15)")
    parser.add_argument("--hosts", type=int, default=20, help="hosts of the playbook (default 20)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="vf-filter-import-") as tmp:
        roots = {"now": ROOT / "collections", "baseline": collection_at(args.baseline, Path(tmp))}
        for root in roots.values():  # bytecode written before timing, as an installed collection has it
            compileall.compile_dir(root / PACKAGE.replace(".", "/") / "plugins", quiet=1)
        names = sorted(set(filters(roots["now"])) & set(filters(roots["baseline"])))
        each: dict[str, dict[str, int]] = {side: {} for side in roots}
        for name in names:
            module = f"{PACKAGE}.plugins.filter.{name}"
            for _ in range(args.repeat):  # the two sides alternate, so a busy moment costs both alike
                for side, root in roots.items():
                    us = import_us(root, [module])
                    each[side][name] = min(us, each[side].get(name, us))
        modules = [f"{PACKAGE}.plugins.filter.{name}" for name in names]
        together = {
            side: min(import_us(root, modules) for _ in range(args.repeat)) for side, root in roots.items()
        }
        workdir = Path(tmp) / "play"
        workdir.mkdir()
        python = f"ansible_connection=local ansible_python_interpreter={sys.executable}"
        (workdir / "inventory.ini").write_text(f"[bench]\nh[1:{args.hosts}] {python}\n")
        runs: dict[str, list[tuple[float, float]]] = {side: [] for side in [*roots, "preloaded"]}
        for _ in range(args.repeat):  # alternating, as the imports
            for side, root in roots.items():
                runs[side].append(playbook(root, workdir, args.hosts))
            runs["preloaded"].append(playbook(roots["now"], workdir, args.hosts, PRELOADED_HOSTS))
        played = {side: min(found) for side, found in runs.items()}  # the fastest run, with its CPU

    now, base = each["now"], each["baseline"]
    print(f"{len(names)} filter plugins, fastest of {args.repeat} fresh processes each, ms:")
    print(f"  {'filter':42} {'now':>7}   {'baseline ' + args.baseline:>16}")
    for name in sorted(names, key=lambda n: -base[n])[: args.top]:
        print(f"  {name:42} {now[name] / 1000:7.1f}   {base[name] / 1000:16.1f}")
    totals = {
        "sum, each filter in its own process": (sum(now.values()), sum(base.values())),
        "all filters in one process": (together["now"], together["baseline"]),
    }
    for label, (ours, theirs) in totals.items():
        print(f"  {label:42} {ours / 1000:7.1f}   {theirs / 1000:16.1f}   ratio {ours / theirs:.2f}x")
    (wall, cpu), (base_wall, base_cpu) = played["now"], played["baseline"]
    print(f"ansible-playbook, {args.hosts} hosts x 3 filter tasks, fastest of {args.repeat} runs, s:")
    print(f"  {'seconds':42} {wall:7.2f}   {base_wall:16.2f}   ratio {wall / base_wall:.2f}x")
    print(
        f"  {'CPU seconds, all its processes':42} {cpu:7.2f}   {base_cpu:16.2f}   ratio {cpu / base_cpu:.2f}x"
    )
    pre_wall, pre_cpu = played["preloaded"]
    print(
        "the same play now, its filters loaded once in the controller (vllm_fleet_preload) vs in each worker:"
    )
    print(f"  {'seconds':42} {pre_wall:7.2f}   {wall:16.2f}   ratio {pre_wall / wall:.2f}x")
    print(
        f"  {'CPU seconds, all its processes':42} {pre_cpu:7.2f}   {cpu:16.2f}   ratio {pre_cpu / cpu:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
