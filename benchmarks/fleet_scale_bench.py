#!/usr/bin/env python3
"""How the cost of a run grows with the fleet: simulated fleets of 1, 16 and 100 GPU hosts.

Each simulated host is a systemd container (MOLECULE_IMAGE, about 10 MB of memory each: systemd,
journald, no services of its own) on one Docker network, with the lab's nvidia-smi stand-in (half of
them replay an 8x H100 host, half an 8x RTX 4090 host: two rollout groups), the machine's Docker
engine through its socket and the lab's no-driver settings. No model is served: this measures
Ansible's own cost per host (inventory, planner, templating, the modules on the hosts).

  no-change   the repository's site.yml, run again on a converged fleet: nothing changes (checked)
  rollout     playbooks/upgrade.yml (plan, then per group canary-first batches: reach, drain,
              wait, vllm_server, gate, undrain) with nothing to replace (--rollout)

Every size runs under each of the settings compared (--settings): the repository's ansible.cfg
(forks 20, pipelining, jsonfile fact cache with smart gathering), forks 5, forks 50, no pipelining
and the mitogen_linear strategy (mitogen's own docker transport). The table gives seconds per host
and the ratio to the same settings at 1 host (target: <= 1.0x at 100 hosts), and the controller's
peak memory (PSS of ansible-playbook, its forks and the docker CLI processes they start, sampled
every 0.2 s) at the largest size. Then a rollout where a host stops answering mid-rollout: the
rollout must stop there, cleanly, with the hosts after it untouched (--unreachable).

Playbooks run through ansible-runner: recaps and failures are read from its events and stats, and
each run's output is kept as WORKDIR/NAME.log (its events under WORKDIR/runner/NAME/artifacts).
Everything it creates is named vf-up-scale-* and removed at the end (--keep leaves it).
Usage (repository root, root, the machine's Docker engine; the control-node venv's python, which has
ansible-runner and mitogen):
  eval "$(bin/bootstrap)"
  flock /work/lab.lock benchmarks/fleet_scale_bench.py [--sizes 1,16,100] [--settings NAME,...]
      [--rollout] [--unreachable] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
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
CONVERGED_IMAGE = f"{PREFIX}/converged:latest"  # host 1 once converged; removed at the end
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


def inventory(count: int, connection: str = "community.docker.docker") -> dict:
    groups: dict[str, dict] = {}
    for index in range(1, count + 1):
        group = groups.setdefault(
            group_of(index), {"hosts": {}, "vars": {"lab_gpu_profile": PROFILES[group_of(index)]}}
        )
        group["hosts"][host_name(index)] = {}
    return {
        "all": {
            "vars": {
                "ansible_connection": connection,
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
                        # no GPU exporter container (as in the lab); the model store is a folder of
                        # each host's own (a tmpfs), as where the hosts share storage by other means
                        "dcgm_exporter_enabled": False,
                        "shared_storage_mode": "existing",
                        "shared_storage_existing_require_mountpoint": False,
                        # the writer host's hub clients from the control node's wheelhouse (as the lab's
                        # storage host): the hosts reach no package index
                        "model_weights_pip_extra_args": "--no-index --find-links /opt/wheels",
                    },
                },
                "gateways": {"hosts": {}},
            },
        }
    }


# The settings compared: environment of ansible-playbook, connection of the hosts.
def mitogen_strategy_dir() -> str | None:
    try:
        import ansible_mitogen  # noqa: PLC0415  # only where the mitogen settings run
    except ImportError:
        return None
    return str(Path(ansible_mitogen.__file__).parent / "plugins" / "strategy")


SETTINGS: dict[str, tuple[str, dict[str, str], str]] = {
    # name: (label, environment, connection)
    "default": ("ansible.cfg: forks 20, pipelining", {}, "community.docker.docker"),
    "forks5": ("forks 5", {"ANSIBLE_FORKS": "5"}, "community.docker.docker"),
    "forks50": ("forks 50", {"ANSIBLE_FORKS": "50"}, "community.docker.docker"),
    "nopipelining": ("no pipelining", {"ANSIBLE_PIPELINING": "false"}, "community.docker.docker"),
    # mitogen swaps in its own transport for the short connection names only (docker, ssh, local, ...)
    # (a longer connection timeout: 20 interpreters bootstrapping at once on 2 cores take over 10 s)
    "mitogen": (
        "mitogen_linear, forks 20",
        {"ANSIBLE_STRATEGY": "mitogen_linear", "ANSIBLE_TIMEOUT": "120"},
        "docker",
    ),
}


class MemorySampler:
    """Peak PSS of this process's descendants (ansible-playbook, its forks, the docker CLI processes)."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak_kib = 0
        self.peak_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def descendants(root: int) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        found, todo = [], [root]
        while todo:
            for child in children.get(todo.pop(), []):
                found.append(child)
                todo.append(child)
        return found

    @staticmethod
    def pss_kib(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            pids = self.descendants(me)
            self.peak_kib = max(self.peak_kib, sum(self.pss_kib(pid) for pid in pids))
            self.peak_processes = max(self.peak_processes, len(pids))
            self._stop.wait(self.interval)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


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
        self.site = REPO / "site.yml"
        self.memory: dict[str, MemorySampler] = {}

    def wheelhouse(self) -> Path:
        """The pinned hub clients' wheels (tests/hub/lab-hub fills the same folder for the lab)."""
        cache = Path(self.env.get("VLLM_FLEET_CACHE") or Path.home() / ".cache" / "vllm-fleet")
        wheels = cache / "weights-wheels"
        requirements = REPO / "roles" / "model_weights" / "files" / "requirements.txt"
        stamp = wheels / (".complete-" + hashlib.sha1(requirements.read_bytes()).hexdigest())
        if not stamp.exists():
            wheels.mkdir(parents=True, exist_ok=True)
            sh(sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels), "-r", str(requirements))
            stamp.touch()
        return wheels

    def up(self, count: int, image: str | None = None) -> None:
        # each systemd host takes a few inotify instances of the one user (root) they share
        with open("/proc/sys/fs/inotify/max_user_instances") as handle:
            limit = int(handle.read())
        if limit < 8 * count:
            raise SystemExit(
                f"fs.inotify.max_user_instances is {limit}: {count} systemd hosts need about {8 * count} "
                f"(sysctl -w fs.inotify.max_user_instances={max(8192, 8 * count)})"
            )
        if not sh("docker", "network", "ls", "-q", "--filter", f"name=^{NETWORK}$").strip():
            sh("docker", "network", "create", "--label", LABEL, NETWORK)
        docker_cli = sh("sh", "-c", "command -v docker").strip()
        wheels = self.wheelhouse()
        for index in range(1, count + 1):
            name = host_name(index)
            if sh("docker", "ps", "-q", "--filter", f"name=^{name}$").strip():
                continue
            sh("docker", "rm", "-f", name, check=False)
            sh(
                "docker", "run", "-d", "--name", name, "--hostname", name, "--label", LABEL,
                "--network", NETWORK, "--cap-add", "SYS_ADMIN", "--tmpfs", "/run", "--tmpfs", "/run/lock",
                "--tmpfs", "/srv/models",
                "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "-e", "container=docker",
                "-v", "/var/run/docker.sock:/var/run/docker.sock",
                "-v", f"{docker_cli}:/usr/local/bin/docker:ro", "-v", f"{wheels}:/opt/wheels:ro",
                image or self.env["MOLECULE_IMAGE"], "/lib/systemd/systemd",
            )  # fmt: skip

    def clone(self, count: int) -> None:
        """Hosts 2..count from a snapshot of converged host 1: the packages every host installs are
        there already (apt on 100 hosts at once would measure the mirror, not Ansible); the converge
        that follows still writes every host's own configuration."""
        sh("docker", "commit", "--change", 'CMD ["/lib/systemd/systemd"]', host_name(1), CONVERGED_IMAGE)
        self.up(count, image=CONVERGED_IMAGE)

    def down(self) -> None:
        ids = sh("docker", "ps", "-aq", "--filter", f"label={LABEL}").split()
        if ids:
            sh("docker", "rm", "-f", *ids, check=False)
        sh("docker", "image", "rm", "-f", CONVERGED_IMAGE, check=False)
        sh("docker", "network", "rm", NETWORK, check=False)

    def inventory(self, count: int, connection: str = "community.docker.docker") -> Path:
        path = self.workdir / f"hosts-{count}-{connection.rsplit('.', 1)[-1]}.yml"
        path.write_text(json.dumps(inventory(count, connection), indent=1))
        return path

    def playbook(self, name: str, count: int, playbook: str | Path, settings: dict[str, str] | None = None,
                 check: bool = True, connection: str = "community.docker.docker") -> float:  # fmt: skip
        env = {
            **self.env,
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.workdir / "facts"),
            **(settings or {}),
        }
        with MemorySampler() as memory:
            run = run_playbook(
                playbook, self.inventory(count, connection), env, self.workdir / "runner" / name
            )
        self.memory[name] = memory
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


def settings_env(name: str) -> tuple[str, dict[str, str], str]:
    label, env, connection = SETTINGS[name]
    if env.get("ANSIBLE_STRATEGY", "").startswith("mitogen"):
        strategies = mitogen_strategy_dir()
        if strategies is None:
            raise RuntimeError("mitogen is not installed (pip install -r requirements.txt)")
        env = {**env, "ANSIBLE_STRATEGY_PLUGINS": strategies}
    return label, env, connection


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,16,100")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"of {', '.join(SETTINGS)}")
    parser.add_argument(
        "--at",
        action="append",
        default=[],
        metavar="SIZE=NAME,...",
        help="other settings at one size, e.g. 100=mitogen (where all of them take too long)",
    )
    parser.add_argument(
        "--converge-settings", default="default", help="settings of the first (converging) runs"
    )
    parser.add_argument("--rollout", action="store_true", help="also time playbooks/upgrade.yml per size")
    parser.add_argument("--unreachable", action="store_true", help="also the unreachable-host rollout")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--workdir")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    chosen = [name.strip() for name in args.settings.split(",") if name.strip()]
    at: dict[int, list[str]] = {}
    for spec in args.at:
        size, _, names_at = spec.partition("=")
        if not size.strip().isdigit() or not names_at:
            parser.error(f"--at {spec}: expected SIZE=NAME,... (e.g. 100=mitogen)")
        at[int(size)] = [n.strip() for n in names_at.split(",") if n.strip()]
    unknown = [
        name for name in chosen + sum(at.values(), []) + [args.converge_settings] if name not in SETTINGS
    ]
    if unknown:
        parser.error(f"--settings: unknown {', '.join(unknown)}; choose from {', '.join(SETTINGS)}")
    env = bootstrap_env()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix=f"{PREFIX}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(env, workdir)
    print(f"fleet scale benchmark: logs in {workdir}", flush=True)
    # seconds of the no-change run by (settings, size); an error text where a run failed
    results: dict[tuple[str, int], float | str] = {}
    rollouts: dict[int, float] = {}
    problems: list[str] = []
    biggest = max(sizes)
    try:
        # host 1 converged, then the others from its snapshot; every host gets the stand-in, then a
        # first run converges the whole fleet
        _label, first, connection = settings_env(args.converge_settings)
        prep = {**first, "ANSIBLE_CACHE_PLUGIN": "memory"}
        prepare = REPO / "tests" / "lab" / "prepare.yml"
        fleet.up(1)
        fleet.playbook("prepare-1", 1, prepare, prep, connection=connection)
        converge = fleet.playbook("converge-1", 1, fleet.site, first, connection=connection)
        start = time.monotonic()
        fleet.clone(biggest)
        took = time.monotonic() - start
        print(f"  host 1 converged in {converge:.0f} s; {biggest} hosts up in {took:.0f} s", flush=True)
        fleet.playbook("prepare", biggest, prepare, prep, connection=connection)
        converge = fleet.playbook("converge", biggest, fleet.site, first, connection=connection)
        print(f"  converge of {biggest} hosts: {converge:.0f} s", flush=True)
        # the smallest and the largest first: the ratio the target is about
        for count in dict.fromkeys([sizes[0], sizes[-1], *sizes[1:-1]]):
            for name in at.get(count, chosen):
                try:
                    label, settings, connection = settings_env(name)
                    seconds = fleet.playbook(
                        f"no-change-{name}-{count}", count, fleet.site, settings, connection=connection
                    )
                    results[(name, count)] = seconds
                    print(f"  {count:>3} hosts, {label}: {seconds:6.1f} s ({seconds / count:.2f} s/host)",
                          flush=True)  # fmt: skip
                except RuntimeError as exc:  # one setting failing does not stop the others
                    results[(name, count)] = str(exc).splitlines()[0][:300]
                    print(f"  {count:>3} hosts, {name}: FAILED {results[(name, count)]}", flush=True)
            if args.rollout:
                rollouts[count] = fleet.playbook(
                    f"rollout-{count}", count, REPO / "playbooks" / "upgrade.yml"
                )
        if args.unreachable and biggest >= 4:
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
    names = list(dict.fromkeys(chosen + sum(at.values(), [])))
    print(render_table(results, names, sizes, fleet.memory))
    if rollouts:
        shown = [f"{n} hosts {sec:.0f} s ({sec / n:.2f} s/host)" for n, sec in rollouts.items()]
        print("\nrollout (playbooks/upgrade.yml, nothing to replace): " + ", ".join(shown))
    best = best_at(results, names, sizes)
    if best is not None:
        name, ratio = best
        verdict = "met" if ratio <= 1.0 else "NOT met"
        print(f"\nper-host cost of the no-change run at {biggest} hosts: {ratio:.2f}x that at {sizes[0]} "
              f"with {SETTINGS[name][0]} (target <= 1.0x: {verdict})")  # fmt: skip
    failed = [name for name in names if any(isinstance(results.get((name, n)), str) for n in sizes)]
    for name in failed:
        errors = {n: results[(name, n)] for n in sizes if isinstance(results.get((name, n)), str)}
        print(f"NOTE: {SETTINGS[name][0]} failed: {errors}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    default_failed = any(isinstance(results.get(("default", n)), str) for n in sizes)
    return 1 if problems or default_failed else 0


def ratio_to_first(results: Mapping[tuple[str, int], float | str], name: str, sizes: list[int], count: int
                   ) -> float | None:  # fmt: skip
    """Per-host cost at ``count`` hosts over that at the smallest size, same settings (None: a run failed)."""
    first, at = results.get((name, sizes[0])), results.get((name, count))
    if not isinstance(first, float) or not isinstance(at, float) or first <= 0:
        return None
    return (at / count) / (first / sizes[0])


def best_at(results: Mapping[tuple[str, int], float | str], names: list[str], sizes: list[int]
            ) -> tuple[str, float] | None:  # fmt: skip
    """The settings with the lowest per-host cost at the largest size, and its ratio to the smallest."""
    ratios = [(results[(n, sizes[-1])], n) for n in names if isinstance(results.get((n, sizes[-1])), float)]
    if not ratios or len(sizes) < 2:
        return None
    name = min(ratios)[1]
    ratio = ratio_to_first(results, name, sizes, sizes[-1])
    return (name, ratio) if ratio is not None else None


def render_table(results: Mapping[tuple[str, int], float | str], names: list[str], sizes: list[int],
                 memory: Mapping[str, MemorySampler]) -> str:  # fmt: skip
    """Seconds per host of the no-change run for each settings and size, with the ratio to the smallest
    size, and the controller's peak memory at the largest."""
    head = (
        f"{'no-change site.yml: s/host (x vs ' + str(sizes[0]) + ' host)':<34}"
        + "".join(f"{str(n) + ' hosts':>17}" for n in sizes)
        + f"{'controller peak at ' + str(sizes[-1]):>26}"
    )
    lines = [head]
    for name in names:
        cells = []
        for count in sizes:
            value = results.get((name, count))
            if isinstance(value, float):
                ratio = ratio_to_first(results, name, sizes, count)
                cells.append(
                    f"{value / count:>9.2f} ({ratio:.2f}x)"
                    if ratio is not None
                    else f"{value / count:>17.2f}"
                )
            else:
                cells.append(f"{'failed' if value else '-':>17}")
        sampler = memory.get(f"no-change-{name}-{sizes[-1]}")
        peak = (f"{sampler.peak_kib / 1024:.0f} MiB, {sampler.peak_processes} procs" if sampler and
                isinstance(results.get((name, sizes[-1])), float) else "-")  # fmt: skip
        lines.append(f"{SETTINGS[name][0]:<34}" + "".join(f"{c:>17}" for c in cells) + f"{peak:>26}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
