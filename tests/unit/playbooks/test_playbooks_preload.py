"""Each of the collection's playbooks loads the collection's filters in the controller before its first task
(plugins/filter/vllm_fleet_preload.py): the hosts pattern of its first play calls one of them, so that no
task's worker process imports them anew on every host. A playbook added without it fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.vllm_fleet.vllm_fleet.plugins.filter.vllm_fleet_preload import FilterModule

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOKS = sorted((ROOT / "playbooks").glob("*.yml"))
COLLECTION_FILTER = "| vllm_fleet.vllm_fleet."


def first_play(path: Path) -> dict:
    """The first play a playbook runs, following import_playbook into the collection's playbooks."""
    play = yaml.safe_load(path.read_text(encoding="utf-8"))[0]
    imported = play.get("ansible.builtin.import_playbook")
    if imported:
        return first_play(ROOT / "playbooks" / f"{imported.rsplit('.', 1)[-1]}.yml")
    return play


def test_the_filter_returns_the_pattern_it_is_given():
    preload = FilterModule().filters()["vllm_fleet_preload"]
    assert preload("gpu_nodes") == "gpu_nodes" and preload(["a", "b"]) == ["a", "b"]


@pytest.mark.parametrize("path", PLAYBOOKS, ids=lambda p: p.name)
def test_the_first_play_loads_the_collections_filters_in_the_controller(path):
    hosts = str(first_play(path)["hosts"])
    assert COLLECTION_FILTER in hosts, f"{path.name}: hosts {hosts!r} calls none of the collection's filters"
