"""The rollout plays keep a serving group together: every rescued block ends with the unit step, and the
gate and the restore ask over HTTP only the models served there (a follower's are checked by container)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[5]


def _rollout_play(playbook: str) -> dict:
    plays = yaml.safe_load((REPO / "playbooks" / playbook).read_text())
    return next(p for p in plays if "serial" in p)


def _blocks(play: dict) -> list[dict]:
    return [
        t for section in ("pre_tasks", "tasks", "post_tasks") for t in play.get(section) or [] if "block" in t
    ]


@pytest.mark.parametrize("playbook", ["upgrade.yml", "rollback.yml"])
def test_every_rescued_block_of_a_rollout_ends_with_the_unit_step(playbook: str) -> None:
    # a failure in the block sends every member of a serving group to the rescue, not only the one that failed
    rescued = [b for b in _blocks(_rollout_play(playbook)) if b.get("rescue")]
    assert rescued
    for block in rescued:
        last = block["block"][-1]
        assert last["ansible.builtin.include_role"]["tasks_from"] == "unit", block["name"]
        assert last["vars"]["__fleet_rollout_step"]
    steps = [b["block"][-1]["vars"]["__fleet_rollout_step"] for b in rescued]
    assert len(set(steps)) == len(steps)  # each block its own step: an earlier one is no pass


def test_the_gate_and_the_restore_ask_only_the_models_served_over_http() -> None:
    tasks = REPO / "roles" / "fleet_rollout" / "tasks"
    gate = yaml.safe_load((tasks / "gate.yml").read_text())
    restore = yaml.safe_load((tasks / "restore.yml").read_text())
    restore_tasks = [t for item in restore for t in item.get("block", [item])]
    for task in [*gate, *restore_tasks]:
        if "vllm_fleet.vllm_fleet.vllm_server_ready" in task:
            assert "http" in task["loop"], task["name"]
