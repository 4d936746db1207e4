#!/usr/bin/env python3
"""How the cost of a run grows with the fleet: simulated fleets of 1, 4 and 16 GPU hosts.

Each host is a systemd container (MOLECULE_IMAGE) with the lab's nvidia-smi stand-in (half of them
replay an 8x H100 host, half an 8x RTX 4090 host: two rollout groups), the machine's Docker engine
through its socket and the lab's no-driver settings. No model is served: this measures Ansible's
own cost per host.

  no-change   the stages of site.yml that apply without serving (validate, hosts: GPU facts,
              driver, Docker engine, container toolkit), run a second time: nothing changes
  rollout     playbooks/upgrade.yml (plan, then per group canary-first batches: reach, drain,
              wait, vllm_server, gate, undrain) with nothing to replace

Prints a table of wall time and time per host for each fleet size, then the 16-host no-change run
under Ansible settings: the repository's ansible.cfg (forks 20, jsonfile fact cache with smart
gathering), +pipelining (ANSIBLE_PIPELINING: [ssh_connection] pipelining does not reach the docker
connection), forks 5, and no fact cache. Target: per-host cost of the no-change run at 16 hosts
<= 1.2x that at 1 host. Then a rollout where a host stops answering mid-rollout: the rollout must
stop there, cleanly, with the hosts after it untouched.

Playbooks run through ansible-runner: recaps and failures are read from its events and stats, and
each run's output is kept as WORKDIR/NAME.log (its events under WORKDIR/runner/NAME/artifacts).
Everything it creates is named vf-up-scale-* and removed at the end (--keep leaves it).
Usage (repository root, root, the machine's Docker engine; the control-node venv's python, which has
ansible-runner):
  eval "$(bin/bootstrap)"
  benchmarks/fleet_scale_bench.py [--sizes 1,4,16] [--skip-settings] [--skip-unreachable] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import ansible_runner
except ImportError:  # told at the first playbook, so that --help works anywhere
    ansible_runner = None

REPO = Path(__file__).resolve().parent.parent
PREFIX = "vf-up-scale"
NETWORK = PREFIX
LABEL = "io.vllm-fleet.test=upgrade-scale"
PROFILES = {"scale_h100": "h100x8", "scale_4090": "rtx4090x8"}


def sh(*args: str, check: bool = True, timeout: float = 600) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def bootstrap_env() -> dict[str, str]:
    out = sh(str(REPO / "bin" / "bootstrap"), timeout=3600)
    env = dict(os.environ)
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    if not env.get("MOLECULE_IMAGE"):
        raise SystemExit("bin/bootstrap did not export MOLECULE_IMAGE")
    return env


def host_name(index: int) -> str:
    return f"{PREFIX}-{index:02d}"


def group_of(index: int) -> str:
    return "scale_h100" if index % 2 == 1 else "scale_4090"


def inventory(count: int) -> dict:
    groups: dict[str, dict] = {}
    for index in range(1, count + 1):
        group = groups.setdefault(
            group_of(index), {"hosts": {}, "vars": {"lab_gpu_profile": PROFILES[group_of(index)]}}
        )
        group["hosts"][host_name(index)] = {}
    return {
        "all": {
            "vars": {
                "ansible_connection": "community.docker.docker",
                "ansible_python_interpreter": "/usr/bin/python3",
            },
            "children": {
                "gpu_nodes": {
                    "children": groups,
                    "vars": {
                        # the lab's no-driver settings: driver and toolkit are the host's, the engine shared
                        "nvidia_driver_manage": False,
                        "nvidia_container_toolkit_manage": False,
                        "docker_engine_manage": False,
                        "docker_engine_source": "distro",
                        # no model: the rollout measures its own cost
                        "vllm_server_models": [],
                        "vllm_fleet_api_key": "vf-up-scale-backend-0123456789",
                        "vllm_server_container_prefix": "{{ inventory_hostname }}-vllm-",
                    },
                },
                "gateways": {"hosts": {}},
            },
        }
    }


SITE = """---
# The stages of site.yml that apply to hosts that serve nothing.
- name: Validate
  ansible.builtin.import_playbook: {repo}/playbooks/validate.yml

- name: Hosts
  ansible.builtin.import_playbook: {repo}/playbooks/hosts.yml
"""


# --- playbook runs through ansible-runner --------------------------------------------------------------

REACH_TASK = "reach | Show the host's place in the rollout"  # roles/fleet_rollout/tasks/reach.yml


@dataclass
class PlaybookRun:
    rc: int
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    seconds: float
    stats: dict[str, dict[str, int]]  # the play recap: ok, changed, failures, dark, skipped, ... per host
    failures: list[dict[str, str]] = field(default_factory=list)  # host, task, msg of each failed task
    log: str = ""  # the playbook's output as ansible-playbook prints it


def run_playbook(
    playbook: str | Path,
    inventory: str | Path,
    env: Mapping[str, str],
    data_dir: Path,
    extravars: dict[str, Any] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    timeout: int = 3600,
) -> PlaybookRun:
    """Run ``playbook`` from the repository root (its ansible.cfg) with ansible-runner; ``on_event``
    sees every event as it arrives."""
    if ansible_runner is None:
        raise SystemExit('needs ansible-runner: run with the control-node venv (eval "$(bin/bootstrap)")')
    failures: list[dict[str, str]] = []

    def handler(event: dict[str, Any]) -> bool:
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_failed" and not data.get("ignore_errors"):
            msg = (data.get("res") or {}).get("msg", "")
            failures.append({"host": data.get("host", ""), "task": data.get("task", ""), "msg": str(msg)})
        if on_event is not None:
            on_event(event)
        return True  # keep the event in the artifacts

    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    start = time.monotonic()
    runner = ansible_runner.run(
        private_data_dir=str(data_dir),
        project_dir=str(REPO),  # the working directory: the repository's ansible.cfg applies
        playbook=str(playbook),
        inventory=str(inventory),
        envvars=dict(env),
        extravars=extravars,
        # runner's own jsonfile fact cache would override the ANSIBLE_CACHE_* settings measured here
        fact_cache_type="none",
        event_handler=handler,
        quiet=True,
        timeout=timeout,
    )
    seconds = time.monotonic() - start
    log = runner.stdout.read() if runner.stdout else ""
    return PlaybookRun(
        rc=int(runner.rc if runner.rc is not None else -1),
        status=str(runner.status),
        seconds=seconds,
        stats=dict(runner.stats or {}),
        failures=failures,
        log=log,
    )


def changed_hosts(run: PlaybookRun) -> dict[str, int]:
    """Hosts with changed tasks in the recap, and how many."""
    return {host: count for host, count in (run.stats.get("changed") or {}).items() if count}


def is_turn_of(event: Mapping[str, Any], host: str) -> bool:
    """The rollout's reach step announced ``host`` (``Upgrade of HOST: ...``): its turn has begun."""
    data = event.get("event_data") or {}
    return (
        event.get("event") == "runner_on_ok"
        and data.get("host") == host
        and data.get("task") == REACH_TASK
        and str((data.get("res") or {}).get("msg", "")).startswith(f"Upgrade of {host}:")
    )


def stopped_cleanly_at(run: PlaybookRun, host: str) -> bool:
    """The run failed at ``host`` with the rollout's own message naming the hosts not reached."""
    return any(f["host"] == host and "not reached" in f["msg"] for f in run.failures)


class Fleet:
    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env = env
        self.workdir = workdir
        self.site = workdir / "site-no-serving.yml"
        self.site.write_text(SITE.format(repo=REPO))

    def up(self, count: int) -> None:
        if not sh("docker", "network", "ls", "-q", "--filter", f"name=^{NETWORK}$").strip():
            sh("docker", "network", "create", "--label", LABEL, NETWORK)
        docker_cli = sh("sh", "-c", "command -v docker").strip()
        for index in range(1, count + 1):
            name = host_name(index)
            if sh("docker", "ps", "-q", "--filter", f"name=^{name}$").strip():
                continue
            sh("docker", "rm", "-f", name, check=False)
            sh(
                "docker", "run", "-d", "--name", name, "--hostname", name, "--label", LABEL,
                "--network", NETWORK, "--cap-add", "SYS_ADMIN", "--tmpfs", "/run", "--tmpfs", "/run/lock",
                "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "-e", "container=docker",
                "-v", "/var/run/docker.sock:/var/run/docker.sock",
                "-v", f"{docker_cli}:/usr/local/bin/docker:ro",
                self.env["MOLECULE_IMAGE"], "/lib/systemd/systemd",
            )  # fmt: skip

    def down(self) -> None:
        ids = sh("docker", "ps", "-aq", "--filter", f"label={LABEL}").split()
        if ids:
            sh("docker", "rm", "-f", *ids, check=False)
        sh("docker", "network", "rm", NETWORK, check=False)

    def inventory(self, count: int) -> Path:
        path = self.workdir / f"hosts-{count}.yml"
        path.write_text(json.dumps(inventory(count), indent=1))
        return path

    def playbook(self, name: str, count: int, playbook: str | Path, settings: dict[str, str] | None = None,
                 check: bool = True) -> float:  # fmt: skip
        env = {
            **self.env,
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.workdir / "facts"),
            **(settings or {}),
        }
        run = run_playbook(playbook, self.inventory(count), env, self.workdir / "runner" / name)
        (self.workdir / f"{name}.log").write_text(run.log)
        if check and run.rc != 0:
            raise RuntimeError(
                f"{name}: {playbook} failed (rc {run.rc}, {run.status}): {run.failures[:3]}; "
                f"see {self.workdir / name}.log"
            )
        if check and name.startswith("no-change") and changed_hosts(run):
            raise RuntimeError(f"{name}: the second run changed something: {changed_hosts(run)}")
        return run.seconds

    def unreachable_rollout(self, count: int, victim: int) -> dict:
        """A rollout of ``count`` hosts, one per batch; host ``victim`` stops before its turn."""
        env = {**self.env, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CACHE_PLUGIN": "memory"}
        extra = {"fleet_rollout_serial": [1], "fleet_rollout_group_order": ["scale_h100", "scale_4090"]}
        order = [host_name(i) for i in range(1, count + 1) if group_of(i) == "scale_h100"] + [
            host_name(i) for i in range(1, count + 1) if group_of(i) == "scale_4090"
        ]
        before_victim, target = order[victim - 2], order[victim - 1]
        marks = {h: self.fact_mtime(h) for h in order}
        stopped = []

        def stop_the_victim(event: dict[str, Any]) -> None:
            if not stopped and is_turn_of(event, before_victim):
                sh("docker", "stop", "-t", "1", target)
                stopped.append(target)

        data_dir = self.workdir / "runner" / "unreachable"
        upgrade = REPO / "playbooks" / "upgrade.yml"
        run = run_playbook(upgrade, self.inventory(count), env, data_dir, extra, on_event=stop_the_victim)
        (self.workdir / "unreachable.log").write_text(run.log)
        sh("docker", "start", target)
        after = {h: self.fact_mtime(h) for h in order}
        return {"rc": run.rc, "run": run, "order": order, "victim": target, "before": marks, "after": after}

    def fact_mtime(self, host: str) -> str:
        return sh(
            "docker", "exec", host, "stat", "-c", "%Y", "/etc/ansible/facts.d/vllm_fleet.fact", check=False
        ).strip()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--skip-settings", action="store_true")
    parser.add_argument("--skip-unreachable", action="store_true")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--workdir")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    env = bootstrap_env()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix=f"{PREFIX}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(env, workdir)
    print(f"fleet scale benchmark: logs in {workdir}", flush=True)
    rows: list[tuple[int, float, float]] = []
    settings_rows: list[tuple[str, float]] = []
    problems: list[str] = []
    try:
        biggest = max(sizes)
        fleet.up(biggest)
        # every host gets the stand-in once; then a first run converges the fleet
        prep = {"ANSIBLE_CACHE_PLUGIN": "memory"}
        fleet.playbook("prepare", biggest, REPO / "tests" / "lab" / "prepare.yml", prep)
        fleet.playbook("converge", biggest, fleet.site)
        fleet.playbook("rollout-first", biggest, REPO / "playbooks" / "upgrade.yml")
        for count in sizes:
            no_change = fleet.playbook(f"no-change-{count}", count, fleet.site)
            rollout = fleet.playbook(f"rollout-{count}", count, REPO / "playbooks" / "upgrade.yml")
            rows.append((count, no_change, rollout))
            print(f"  {count:>2} hosts: no-change {no_change:6.1f} s, rollout {rollout:6.1f} s", flush=True)
        if not args.skip_settings:
            variants = {
                "ansible.cfg (forks 20, jsonfile cache)": {},
                "+ pipelining": {"ANSIBLE_PIPELINING": "true"},
                "forks 5": {"ANSIBLE_FORKS": "5"},
                "no fact cache": {"ANSIBLE_CACHE_PLUGIN": "memory"},
            }
            for label, settings in variants.items():
                seconds = fleet.playbook(
                    f"no-change-settings-{len(settings_rows)}", biggest, fleet.site, settings
                )
                settings_rows.append((label, seconds))
                print(f"  {biggest} hosts, {label}: {seconds:6.1f} s", flush=True)
        if not args.skip_unreachable and biggest >= 4:
            result = fleet.unreachable_rollout(4, victim=3)
            victim = result["victim"]
            untouched = result["order"][3:]
            if result["rc"] == 0:
                problems.append("unreachable: the rollout did not fail")
            if not stopped_cleanly_at(result["run"], victim):
                problems.append("unreachable: the failure does not name the host and the hosts not reached")
            touched = [h for h in untouched if result["after"][h] != result["before"][h]]
            if touched:
                problems.append(f"unreachable: hosts after {victim} were changed: {touched}")
            print(f"  unreachable {victim} mid-rollout: rc {result['rc']}, hosts after it untouched: "
                  f"{not touched} ({', '.join(untouched)})", flush=True)  # fmt: skip
    except Exception as exc:  # noqa: BLE001  # report, then clean up
        problems.append(str(exc))
    finally:
        if not args.keep:
            fleet.down()
    print()
    print(
        f"{'hosts':>5} {'no-change s':>12} {'per host':>9} {'x 1 host':>9} {'rollout s':>10} {'per host':>9}"
    )
    base = rows[0][1] / rows[0][0] if rows else 0
    for count, no_change, rollout in rows:
        per_host = no_change / count
        print(f"{count:>5} {no_change:>12.1f} {per_host:>9.2f} {per_host / base:>8.2f}x {rollout:>10.1f} "
              f"{rollout / count:>9.2f}")  # fmt: skip
    if settings_rows:
        print()
        print(f"no-change run of {max(sizes)} hosts under Ansible settings:")
        ref = settings_rows[0][1]
        for label, seconds in settings_rows:
            print(f"  {label:<40} {seconds:>7.1f} s  {seconds / ref:>5.2f}x")
    if rows and len(rows) > 1:
        ratio = (rows[-1][1] / rows[-1][0]) / base
        verdict = "met" if ratio <= 1.2 else "NOT met"
        print(
            f"\nper-host cost of the no-change run at {rows[-1][0]} hosts: {ratio:.2f}x "
            f"that at {rows[0][0]} (target <= 1.2x: {verdict})"
        )
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
