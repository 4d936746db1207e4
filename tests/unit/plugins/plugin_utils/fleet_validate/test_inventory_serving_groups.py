"""The inventory check of serving groups (vllm_fleet_serving_groups): one line per problem."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_validate as ic

CAT = ic.load_catalogue()
KEY = "backend-key-0123456789abcdef"
GROUPS = {
    "all": ["g1", "g2", "g3"],
    "gpu_nodes": ["g1", "g2", "g3"],
    "h100": ["g1", "g2", "g3"],
    "llama": ["g1", "g2"],
    "ungrouped": [],
}
CHILDREN = {"all": ["gpu_nodes"], "gpu_nodes": ["h100", "llama"]}
WEIGHTS = [{"name": "m", "source": "huggingface", "repo_id": "org/m", "revision": "main"}]


def _facts(name: str, count: int) -> dict:
    return {
        "present": True,
        "gpus": [
            {"index": i, "name": name, "memory_total_mib": 81559, "compute_capability": "9.0"}
            for i in range(count)
        ],
    }


H100X8 = _facts("NVIDIA H100 80GB HBM3", 8)


def fleet(serving, **changes):
    common = {
        "vllm_fleet_api_key": KEY,
        "model_weights_models": WEIGHTS,
        "vllm_fleet_serving_groups": serving,
        "vllm_server_models": [{"name": "m", "path": "/srv/models/org/m/main", "port": 8000}],
    }
    hosts = {h: {**common, "vllm_fleet_internal_address": f"10.0.0.{i}"} for i, h in enumerate(GROUPS["all"])}
    for host, values in changes.items():
        hosts[host].update(values)
    return hosts


def lines(hosts, groups=GROUPS, facts=None):
    found, _planned = ic.check_inventory(hosts, groups, CHILDREN, CAT, facts or {})
    return [p.line(p.host or "inventory") for p in found]


def test_a_serving_group_of_like_hosts_has_no_problem():
    facts = {h: H100X8 for h in GROUPS["all"]}
    assert lines(fleet(["llama"]), facts=facts) == []
    assert lines(fleet([{"group": "llama", "backend": "mp", "rendezvous_port": 29600}]), facts=facts) == []


def test_a_host_in_two_serving_groups():
    assert lines(fleet(["llama", "h100"])) == [
        "g1: vllm_fleet_serving_groups[1]: g1 is in serving groups llama and h100. "
        "Fix: a host serves one replica: take g1 out of one of them"
    ]


def test_members_with_other_gpus_than_rank0():
    facts = {"g1": H100X8, "g2": _facts("NVIDIA H100 80GB HBM3", 4)}
    assert lines(fleet(["llama"]), facts=facts) == [
        "g1: vllm_fleet_serving_groups: serving group llama: host g2 has 4x NVIDIA H100 80GB HBM3 "
        "(81559 MiB) but g1 (rank 0) has 8x NVIDIA H100 80GB HBM3 (81559 MiB); one replica runs the same "
        "split on every member. Fix: move g2 out of group llama, or give it the same GPUs",
        # g1 and g2 are in GPU group h100 as well: told once for it
        "inventory: h100: mixes GPUs: g1 has 8x NVIDIA H100 80GB HBM3 (cached GPU facts) but g2 has 4x "
        "NVIDIA H100 80GB HBM3 (cached GPU facts); the group is planned once, on one host's GPUs. Fix: give "
        "the hosts with 4x NVIDIA H100 80GB HBM3 a GPU group of their own (a child group of gpu_nodes)",
    ]


def test_rank0_without_a_rendezvous_address():
    hosts = fleet(["llama"])
    del hosts["g1"]["vllm_fleet_internal_address"]
    assert lines(hosts) == [
        "g1: vllm_fleet_internal_address: g1 is rank 0 of serving group llama and has no fixed address "
        "for its other members to meet it at (the rendezvous address). Fix: set "
        "vllm_fleet_internal_address (or vllm_server_listen_address) for g1"
    ]


def test_a_member_serving_other_models():
    hosts = fleet(
        ["llama"], g2={"vllm_server_models": [{"name": "m", "path": "/srv/models/org/m/main", "port": 8001}]}
    )
    assert [line.split(":", 2)[:2] for line in lines(hosts)] == [["g2", " vllm_server_models"]]


@pytest.mark.parametrize(
    ("serving", "text"),
    [
        (["nope"], "vllm_fleet_serving_groups[0]: 'nope' is not a group of the inventory"),
        (
            [{"group": "llama", "backend": "k8s"}],
            "vllm_fleet_serving_groups[0].backend: 'k8s' is not a backend",
        ),
        ("llama", "vllm_fleet_serving_groups: 'llama' is not a list"),
    ],
)
def test_bad_entries_are_one_line(serving, text):
    found = lines(fleet(serving))
    assert len(found) == 1 and text in found[0]
