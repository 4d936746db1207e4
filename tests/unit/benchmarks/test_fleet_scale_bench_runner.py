"""The fleet scale benchmark reads play recaps and failures from ansible-runner, not from printed text:
a tiny local playbook (connection local, localhost aliases) stands in for the fleet."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from fleet_scale_bench import (  # noqa: E402
    REACH_TASK,
    SETTINGS,
    MemorySampler,
    best_at,
    changed_hosts,
    is_turn_of,
    mitogen_strategy_dir,
    ratio_to_first,
    render_table,
    run_playbook,
    settings_env,
    stopped_cleanly_at,
)

INVENTORY = """\
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  hosts:
    node-a: {}
    node-b: {}
    node-c: {}
"""

PLAYBOOK = f"""\
- name: A stand-in rollout
  hosts: all
  gather_facts: false
  serial: 1
  tasks:
    - name: "{REACH_TASK}"
      ansible.builtin.debug:
        msg: "Upgrade of {{{{ inventory_hostname }}}}: group test"

    - name: Show the settings
      ansible.builtin.debug:
        msg: "{{{{ lookup('env', 'ANSIBLE_CACHE_PLUGIN') }}}} {{{{ forks }}}}"
      vars:
        forks: "{{{{ lookup('ansible.builtin.config', 'DEFAULT_FORKS') }}}}"
      run_once: true

    - name: Change node-a only
      ansible.builtin.command: "true"
      changed_when: inventory_hostname == 'node-a'

    - name: A failure that is ignored
      ansible.builtin.command: "false"
      changed_when: false
      ignore_errors: true

    - name: reach | Stop the rollout at a host that does not answer
      ansible.builtin.fail:
        msg: "{{{{ inventory_hostname }}}} is unreachable: 1 host(s) not reached: node-c."
      when: inventory_hostname == 'node-b' and stop | default(true)
"""


def _shown(event: dict) -> str | None:
    """What the "Show the settings" task printed."""
    data = event.get("event_data") or {}
    if event.get("event") == "runner_on_ok" and data.get("task") == "Show the settings":
        return data["res"]["msg"]
    return None


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    return {
        # the venv's ansible-playbook, whatever PATH the tests run with
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "ANSIBLE_CACHE_PLUGIN": "memory",  # nothing written into the repository's fact cache
        "ANSIBLE_NOCOLOR": "1",
    }


def test_recap_and_failures_come_from_the_events(tmp_path, env) -> None:
    seen = []
    run = run_playbook(
        tmp_path / "play.yml", tmp_path / "hosts.yml", env, tmp_path / "runner", on_event=seen.append
    )
    assert run.rc != 0 and run.status == "failed"
    assert changed_hosts(run) == {"node-a": 1}
    assert run.stats["failures"] == {"node-b": 1}
    assert run.stats["ok"]["node-a"] >= 3 and "node-c" not in run.stats["ok"]  # serial 1: stopped at node-b
    # the ignored failure is not a failure; the rollout's stop names the host and the hosts not reached
    assert [(f["host"], f["task"]) for f in run.failures] == [
        ("node-b", "reach | Stop the rollout at a host that does not answer")
    ]
    assert stopped_cleanly_at(run, "node-b") and not stopped_cleanly_at(run, "node-a")
    # the reach step's announcement marks each host's turn, in order, while the run goes on
    turns = [h for h in ("node-a", "node-b", "node-c") for e in seen if is_turn_of(e, h)]
    assert turns == ["node-a", "node-b"]
    assert "PLAY RECAP" in run.log and "node-b" in run.log
    assert (tmp_path / "runner" / "artifacts").is_dir()
    # run from the repository root: its ansible.cfg (forks 20) applies
    assert {_shown(e) for e in seen if _shown(e)} == {"memory 20"}


def test_a_clean_run_and_its_settings(tmp_path, env) -> None:
    # the caller's ANSIBLE_* settings reach ansible-playbook (runner's own fact cache stays out of the way)
    env = {**env, "ANSIBLE_FORKS": "3"}
    seen = []
    run = run_playbook(
        tmp_path / "play.yml",
        tmp_path / "hosts.yml",
        env,
        tmp_path / "runner",
        extravars={"stop": False},
        on_event=seen.append,
    )
    assert {_shown(e) for e in seen if _shown(e)} == {"memory 3"}
    assert (run.rc, run.status) == (0, "successful")
    assert run.failures == [] and run.stats["failures"] == {}
    assert set(run.stats["ok"]) == {"node-a", "node-b", "node-c"}
    assert changed_hosts(run) == {"node-a": 1}
    assert run.seconds > 0
    # a second run into the same folder starts clean
    again = run_playbook(
        tmp_path / "play.yml", tmp_path / "hosts.yml", env, tmp_path / "runner", extravars={"stop": False}
    )
    assert again.rc == 0


def test_is_turn_of_needs_the_reach_step_of_that_host() -> None:
    event = {
        "event": "runner_on_ok",
        "event_data": {
            "host": "h1",
            "task": REACH_TASK,
            "res": {"msg": "Upgrade of h1: scale_h100 (canary)"},
        },
    }
    assert is_turn_of(event, "h1")
    assert not is_turn_of(event, "h10")
    assert not is_turn_of({**event, "event": "runner_on_failed"}, "h1")
    assert not is_turn_of({"event": "runner_on_ok", "event_data": {"host": "h1", "task": "other"}}, "h1")


def test_per_host_ratios_and_the_table() -> None:
    sizes = [1, 16, 100]
    results = {
        ("default", 1): 40.0,
        ("default", 16): 80.0,
        ("default", 100): 300.0,
        ("forks5", 1): 40.0,
        ("forks5", 16): 160.0,
        ("forks5", 100): "no-change-forks5-100: site.yml failed",
    }
    assert ratio_to_first(results, "default", sizes, 100) == pytest.approx(0.075)
    assert ratio_to_first(results, "default", sizes, 16) == pytest.approx(0.125)
    assert ratio_to_first(results, "forks5", sizes, 100) is None
    assert best_at(results, ["default", "forks5"], sizes) == ("default", pytest.approx(0.075))
    table = render_table(results, ["default", "forks5"], sizes, {})
    default_row, forks_row = table.splitlines()[1:]
    assert default_row.startswith(SETTINGS["default"][0])
    assert "40.00 (1.00x)" in default_row and "5.00 (0.12x)" in default_row and "3.00 (0.07x)" in default_row
    assert "10.00 (0.25x)" in forks_row and forks_row.split()[-2] == "failed"


def test_the_memory_sampler_sees_child_processes() -> None:
    import subprocess

    with MemorySampler(interval=0.05) as memory:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; b = bytearray(64 * 1024 * 1024); time.sleep(0.6)"]
        )
        child.wait()
    assert memory.peak_processes >= 1
    assert memory.peak_kib >= 60 * 1024  # the child's 64 MiB, touched by bytearray's zeroing


def test_mitogen_settings_point_at_its_strategy_plugins() -> None:
    label, env, connection = settings_env("mitogen")
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear" and connection == "docker"
    assert Path(env["ANSIBLE_STRATEGY_PLUGINS"], "mitogen_linear.py").is_file()
    assert env["ANSIBLE_STRATEGY_PLUGINS"] == mitogen_strategy_dir()
