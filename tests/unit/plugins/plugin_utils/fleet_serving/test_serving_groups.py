"""Serving groups: one replica over several hosts, planned as one and launched through vLLM's own
multi-node support, with the exact arguments of every member."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import PlanInputError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner.group import (
    group_gpu_spec,
    plan_group,
)
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy, groups
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError
from planner_helpers import config


def _facts(name: str, memory: int, count: int, cc: str) -> dict:
    return {
        "present": True,
        "gpus": [
            {"index": i, "name": name, "memory_total_mib": memory, "compute_capability": cc}
            for i in range(count)
        ],
    }


H100X8 = _facts("NVIDIA H100 80GB HBM3", 81559, 8, "9.0")
A100X8 = _facts("NVIDIA A100-SXM4-80GB", 81920, 8, "8.0")
H100X4 = _facts("NVIDIA H100 80GB HBM3", 81559, 4, "9.0")
RTX4090 = _facts("NVIDIA GeForce RTX 4090", 24564, 1, "8.9")


def _group_plan(model: str, facts: dict, hosts: int, options: dict | None = None) -> dict:
    spec = group_gpu_spec("g", [(f"n{i}", facts) for i in range(hosts)])
    return plan_group("g", config(model), spec, options)


def test_405b_bf16_on_two_h100_nodes_is_tp8_pp2() -> None:
    result = _group_plan("meta-llama__Meta-Llama-3.1-405B", H100X8, 2)
    assert result["feasible"], result["errors"]
    assert (result["tensor_parallel_size"], result["pipeline_parallel_size"]) == (8, 2)
    assert (result["nodes"], result["gpus_per_node"]) == (2, 8)
    assert result["vllm_args"][:4] == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]


def test_405b_on_one_node_is_refused_with_the_group_that_holds_it() -> None:
    result = _group_plan("meta-llama__Meta-Llama-3.1-405B", H100X8, 1)
    assert not result["feasible"]
    assert "serving group g: 1 host(s) of 8x NVIDIA H100 80GB HBM3 cannot hold" in result["errors"][-1]
    assert "a group of 2 such hosts holds it (pipeline_parallel_size 2)" in result["errors"][-1]


def test_deepseek_v3_on_two_h100_nodes() -> None:
    result = _group_plan("deepseek-ai__DeepSeek-V3", H100X8, 2)
    assert result["feasible"], result["errors"]
    assert (result["tensor_parallel_size"], result["pipeline_parallel_size"]) == (8, 2)
    assert result["quantization"] == "fp8"  # the checkpoint's own block FP8
    assert result["kv_cache_tokens"] > 0


def test_70b_bf16_on_two_24gib_hosts_is_refused_naming_the_group_size() -> None:
    result = _group_plan("meta-llama__Meta-Llama-3.1-70B", RTX4090, 2)
    assert not result["feasible"]
    # 2 x 24 GiB cannot hold 131 GiB of bf16 weights; one stage per host needs 7+ such hosts
    last = result["errors"][-1]
    assert last.startswith("serving group g: 2 host(s) of 1x NVIDIA GeForce RTX 4090 cannot hold")
    need = int(last.split("a group of ")[1].split(" ")[0])
    assert need >= 6
    assert _group_plan("meta-llama__Meta-Llama-3.1-70B", RTX4090, need)["feasible"]
    assert not _group_plan("meta-llama__Meta-Llama-3.1-70B", RTX4090, need - 1)["feasible"]


def test_70b_fp8_checkpoint_on_four_24gib_hosts_runs_one_stage_per_host() -> None:
    result = _group_plan("nvidia__Llama-3.1-70B-Instruct-FP8", RTX4090, 4)
    assert result["feasible"], result["errors"]
    assert (result["tensor_parallel_size"], result["pipeline_parallel_size"], result["gpus_per_node"]) == (
        1,
        4,
        1,
    )


@pytest.mark.parametrize(
    ("other", "message"),
    [
        (A100X8, "host n1 has 8x NVIDIA A100-SXM4-80GB (81920 MiB) but n0 (rank 0) has 8x NVIDIA H100"),
        (H100X4, "host n1 has 4x NVIDIA H100 80GB HBM3 (81559 MiB) but n0 (rank 0) has 8x"),
    ],
)
def test_a_group_of_unlike_hosts_is_refused_naming_the_host(other: dict, message: str) -> None:
    with pytest.raises(PlanInputError, match="serving group g: ") as err:
        group_gpu_spec("g", [("n0", H100X8), ("n1", other)])
    assert message in str(err.value)
    assert "Fix: move n1 out of group g" in str(err.value)


def test_a_split_that_does_not_divide_over_the_hosts_is_refused() -> None:
    opts = {"tensor_parallel_size": 1, "pipeline_parallel_size": 3}
    result = _group_plan("meta-llama__Meta-Llama-3.1-8B", H100X8, 2, opts)
    assert not result["feasible"]
    assert any("cannot be split evenly over its 2 hosts" in e for e in result["errors"])


INVENTORY = {
    "gpu_nodes": ["a0", "a1", "b0", "b1", "solo"],
    "llama_a": ["a0", "a1"],
    "llama_b": ["b0", "b1"],
    "h100": ["a0", "a1", "b0", "b1", "solo"],
}


def test_serving_groups_are_replicas_with_rank0_first() -> None:
    found = groups.serving_groups(["llama_a", {"group": "llama_b", "backend": "ray"}], INVENTORY)
    assert [(g.name, g.members, g.backend) for g in found] == [
        ("llama_a", ("a0", "a1"), "auto"),
        ("llama_b", ("b0", "b1"), "ray"),
    ]
    assert groups.group_of("b1", found).rank0 == "b0"
    assert groups.group_of("solo", found) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (["llama_a", "h100"], "a0 is in serving groups llama_a and h100"),
        (["llama_c"], "'llama_c' is not a group of the inventory"),
        (
            [{"group": "llama_a", "backend": "slurm"}],
            "backend: 'slurm' is not a backend. Fix: use one of auto, mp, ray",
        ),
        ([{"group": "llama_a", "rendezvous_port": 80}], "rendezvous_port: 80 is outside 1024-65535"),
        ([{"group": "llama_a", "ports": 1}], "unknown key(s) ports"),
    ],
)
def test_bad_serving_groups_are_one_line_errors(spec: list, message: str) -> None:
    with pytest.raises(ServingError) as err:
        groups.serving_groups(spec, INVENTORY)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def _serve_command() -> list[str]:
    planned = _group_plan("meta-llama__Meta-Llama-3.1-405B", H100X8, 2)["vllm_args"]
    return deploy.vllm_command("/models/llama-405b", "llama-405b", "10.0.0.1", 8000, planned)


PLANNED_405B = [
    "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
    "--max-model-len", "131072", "--max-num-seqs", "152", "--max-num-batched-tokens", "8192",
]  # fmt: skip


def test_multiprocessing_members_get_vllms_multinode_flags() -> None:
    group = groups.serving_groups(["llama_a"], INVENTORY)[0]
    command = _serve_command()
    assert command == [
        "/models/llama-405b", "--served-model-name", "llama-405b", "--host", "10.0.0.1", "--port", "8000",
        *PLANNED_405B,
    ]  # fmt: skip
    lead = groups.member_launch(command, group, "a0", "10.0.0.1", "10.0.0.1", "0.32.0")
    follow = groups.member_launch(command, group, "a1", "10.0.0.1", "10.0.0.2", "0.32.0")
    joined = ["--distributed-executor-backend", "mp", "--nnodes", "2"]
    assert lead["command"] == [*command, *joined, "--node-rank", "0", "--master-addr", "10.0.0.1",
                               "--master-port", "29501"]  # fmt: skip
    assert follow["command"] == [*command, *joined, "--node-rank", "1", "--master-addr", "10.0.0.1",
                                 "--master-port", "29501", "--headless"]  # fmt: skip
    assert (lead["role"], follow["role"], lead["entrypoint"]) == ("leader", "follower", None)


def test_ray_members_form_a_cluster_then_rank0_serves() -> None:
    group = groups.ServingGroup("llama_b", ("b0", "b1"), "ray", 6380)
    command = _serve_command()
    lead = groups.member_launch(command, group, "b0", "10.0.0.1", "10.0.0.1", "0.32.0")
    follow = groups.member_launch(command, group, "b1", "10.0.0.1", "10.0.0.2", "0.32.0")
    assert lead["entrypoint"] == follow["entrypoint"] == ["/bin/sh", "-c"]
    assert lead["command"] == [
        "ray start --head --port=6380 --node-ip-address=10.0.0.1 && exec vllm serve /models/llama-405b "
        "--served-model-name llama-405b --host 10.0.0.1 --port 8000 "
        + " ".join(PLANNED_405B)
        + " --distributed-executor-backend ray"
    ]
    assert follow["command"] == ["exec ray start --block --address=10.0.0.1:6380 --node-ip-address=10.0.0.2"]


def test_auto_falls_back_to_ray_before_the_multinode_launcher() -> None:
    group = groups.ServingGroup("g", ("a", "b"))
    assert groups.launcher("auto", "0.11.2") == "ray"
    assert groups.launcher("auto", "0.12.0") == "mp"
    assert groups.member_launch(["/m"], group, "b", "10.0.0.1", "10.0.0.2", "0.10.2")["port"] == 6379
    with pytest.raises(ServingError, match="backend mp needs vLLM >= 0.12.0"):
        groups.launcher("mp", "0.10.2")


def test_no_rendezvous_address_is_an_error_naming_rank0() -> None:
    group = groups.ServingGroup("g", ("a", "b"))
    with pytest.raises(ServingError, match="no rendezvous address for a \\(rank 0\\)"):
        groups.member_launch(["/m"], group, "b", "", "10.0.0.2", "0.32.0")


def test_extra_args_may_not_set_the_group_flags() -> None:
    groups.check_extra_args("m", ["--enable-prefix-caching"])
    with pytest.raises(ServingError, match="extra_args sets --nnodes"):
        groups.check_extra_args("m", ["--nnodes=3"])


FACTS = {
    "interfaces": ["lo", "eno1", "ib0", "bond-data"],
    "lo": {"device": "lo", "ipv4": {"address": "127.0.0.1"}},
    "eno1": {"device": "eno1", "ipv4": {"address": "192.168.1.5"}},
    "ib0": {"device": "ib0", "ipv4": {"address": "10.10.0.5"}, "ipv6": [{"address": "fe80::1"}]},
    "bond_data": {"device": "bond-data", "ipv4": {"address": "172.16.0.5"},
                  "ipv4_secondaries": [{"address": "172.16.0.50"}]},
}  # fmt: skip


@pytest.mark.parametrize(
    ("address", "iface"),
    [("10.10.0.5", "ib0"), ("192.168.1.5", "eno1"), ("172.16.0.50", "bond-data"), ("fe80::1", "ib0")],
)
def test_the_socket_interface_is_the_one_holding_the_address(address: str, iface: str) -> None:
    env = groups.member_env(groups.ServingGroup("g", ("a",)), "a", address, FACTS)
    assert env == {"NCCL_SOCKET_IFNAME": iface, "GLOO_SOCKET_IFNAME": iface, "VLLM_HOST_IP": address}


def test_an_address_on_no_interface_is_an_error_and_the_group_can_name_one() -> None:
    with pytest.raises(ServingError, match="a has no network interface holding 10.9.9.9"):
        groups.member_env(groups.ServingGroup("g", ("a",)), "a", "10.9.9.9", FACTS)
    env = groups.member_env(groups.ServingGroup("g", ("a",), interface="ib0"), "a", "10.9.9.9", FACTS)
    assert env["NCCL_SOCKET_IFNAME"] == "ib0"


def test_infiniband_devices_reach_the_container() -> None:
    assert groups.rdma_options([]) == {"devices": [], "capabilities": [], "ulimits": []}
    opts = groups.rdma_options(["/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm", "/dev/null"])
    assert opts["devices"] == [
        "/dev/infiniband/rdma_cm:/dev/infiniband/rdma_cm:rwm",
        "/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rwm",
    ]
    assert opts["capabilities"] == ["IPC_LOCK"]


def test_one_member_down_takes_the_replica_down() -> None:
    group = groups.ServingGroup("g", ("a", "b", "c"))
    assert groups.members_down(group, ["a", "b", "c"]) == []
    assert groups.members_down(group, ["a", "c"]) == ["b"]


def _hostvars() -> dict:
    inventory = {"all": ["a0", "a1", "solo"], "gpu_nodes": ["a0", "a1", "solo"], "llama_a": ["a0", "a1"]}
    common = {
        "vllm_fleet_serving_groups": ["llama_a"],
        "groups": inventory,
        "vllm_server_models": [{"name": "llama-405b", "port": 8000}],
    }
    out = {}
    for i, host in enumerate(("a0", "a1", "solo")):
        address = f"10.0.0.{i + 1}"
        out[host] = {
            **common,
            "vllm_fleet_internal_address": address,
            "ansible_facts": {
                "interfaces": ["ens5"],
                "ens5": {"device": "ens5", "ipv4": {"address": address}},
            },
        }
    return out


def _spec(address: str) -> dict:
    command = deploy.vllm_command("/models/llama-405b", "llama-405b", address, 8000, PLANNED_405B)
    env = {"HF_HUB_OFFLINE": "1"}
    return {"name": "llama-405b", "command": command, "env": env, "vllm_version": "0.32.0",
            "url": f"http://{address}:8000"}  # fmt: skip


def test_member_specs_give_each_member_its_launch_env_and_devices() -> None:
    hostvars = _hostvars()
    (lead,) = groups.member_specs([_spec("10.0.0.1")], "a0", hostvars)
    (follow,) = groups.member_specs([_spec("10.0.0.2")], "a1", hostvars, ["/dev/infiniband/uverbs0"])
    assert lead["command"][-9:] == ["mp", "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1",
                                    "--master-port", "29501"]  # fmt: skip
    assert follow["command"][-10:] == ["mp", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1",
                                       "--master-port", "29501", "--headless"]  # fmt: skip
    assert follow["env"] == {"HF_HUB_OFFLINE": "1", "NCCL_SOCKET_IFNAME": "ens5",
                             "GLOO_SOCKET_IFNAME": "ens5", "VLLM_HOST_IP": "10.0.0.2"}  # fmt: skip
    assert (lead["url"], follow["url"]) == ("http://10.0.0.1:8000", "")
    assert (lead["role"], follow["role"], follow["rendezvous"]) == ("leader", "follower", "10.0.0.1:29501")
    assert lead["devices"] == [] and follow["devices"] == [
        "/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rwm"
    ]
    assert groups.member_specs([_spec("10.0.0.3")], "solo", hostvars) == [_spec("10.0.0.3")]


def test_the_gateway_sees_only_rank0_of_a_group() -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import fleet, gateway

    hostvars = _hostvars()
    backends = [
        {"host": h, "address": hostvars[h]["vllm_fleet_internal_address"],
         "models": fleet.endpoints(hostvars[h], host=h)}
        for h in ("a0", "a1", "solo")
    ]  # fmt: skip
    assert [len(b["models"]) for b in backends] == [1, 0, 1]
    assert backends[0]["models"][0]["group"] == "llama_a"
    (route,) = gateway.routes(backends)
    assert [s["host"] for s in route["servers"]] == ["a0", "solo"]  # two replicas: the group and solo


def test_a_rollout_replaces_a_serving_group_as_one_unit() -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.plan import rollout_plan

    members = [
        {"host": "a0", "group": "llama", "serial": [1, "100%"], "unit": "llama_a", "leader": True},
        {"host": "a1", "group": "llama", "serial": [1, "100%"], "unit": "llama_a", "leader": False},
        {"host": "b0", "group": "llama", "serial": [1, "100%"], "unit": "llama_b", "leader": True},
        {"host": "b1", "group": "llama", "serial": [1, "100%"], "unit": "llama_b", "leader": False},
    ]
    models = [{"name": "llama-405b", "port": 8000}]
    plan = rollout_plan(members, models_by_host={h: models for h in ("a0", "a1", "b0", "b1")})
    # two replicas: the canary is one whole group, then the other; one replica stays in service
    assert plan["groups"][0]["batches"] == [["a0", "a1"], ["b0", "b1"]]
    assert plan["batches"] == [2, 2]
    assert plan["problems"] == []
    one = rollout_plan(members[:2], models_by_host={h: models for h in ("a0", "a1")})
    assert one["problems"] == [
        "llama-405b is served by a0 only: replacing it means downtime (fleet_rollout_min_available: 1)"
    ]


def test_a_serving_group_split_over_rollout_groups_is_refused() -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.plan import (
        RolloutError,
        rollout_plan,
    )

    members = [
        {"host": "a0", "group": "x", "unit": "llama_a", "leader": True},
        {"host": "a1", "group": "y", "unit": "llama_a", "leader": False},
    ]
    with pytest.raises(RolloutError, match="serving group llama_a spans rollout groups x and y"):
        rollout_plan(members)


def test_plan_yml_plans_a_serving_group_as_one_replica() -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops.plan_report import (
        normalize_entries,
    )

    models = [{"name": "llama-405b", "group": "llama_a", "config": "/cfg/config.json"},
              {"name": "llama-8b", "group": "h100", "config": "/cfg/config.json"}]  # fmt: skip
    gpu_groups = {"llama_a": ["a0", "a1"], "h100": ["h0", "h1"]}
    entries = normalize_entries(models, gpu_groups, {}, {"serving_groups": [{"group": "llama_a"}]})
    group, plain = entries
    assert (group["nodes"], group["options"]["pipeline_parallel_size"]) == (2, 2)
    assert plain["nodes"] == 1 and "pipeline_parallel_size" not in plain["options"]


def test_a_restored_follower_is_a_follower_again() -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy

    # the role reads role/group from the spec: without them the rollback waited on the follower's empty URL
    old = {
        "version": "v2",
        "container": "vllm-llama",
        "url": "",
        "serving_group": {
            "name": "llama_a",
            "members": ["a0", "a1"],
            "rank": 1,
            "role": "follower",
            "backend": "mp",
            "rendezvous": "10.0.0.1:29501",
        },
    }
    fact = {"models": {"llama": {"current": {**old, "version": "v3"}, "previous": old}}}
    target = deploy.rollback_target(fact, "llama", "v3")
    assert target["version"] == "v2"
    assert (target["role"], target["rank"], target["group"]) == ("follower", 1, "llama_a")
    assert (target["members"], target["backend"], target["rendezvous"]) == (
        ["a0", "a1"],
        "mp",
        "10.0.0.1:29501",
    )
    lone = deploy.rollback_target(
        {"models": {"m": {"current": {"version": "b"}, "previous": {"version": "a"}}}}, "m", "b"
    )
    assert "role" not in lone and "group" not in lone


def test_a_member_restarted_with_its_group_keeps_its_recorded_version() -> None:
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import (
        ServingError,
    )

    member = {"name": "llama_a", "members": ["a0", "a1"], "rank": 1, "role": "follower"}
    fact = {
        "models": {
            "llama": {
                "current": {"version": "v2", "serving_group": member},
                "previous": {"version": "v1", "serving_group": member},
            }
        }
    }
    # running the recorded current version: a rollback goes to the one before, a restart stays
    assert deploy.rollback_target(fact, "llama", "v2")["version"] == "v1"
    restarted = deploy.rollback_target(fact, "llama", "v2", restart=True)
    assert (restarted["version"], restarted["role"]) == ("v2", "follower")
    assert deploy.rollback_target(fact, "llama", "v2", "False")["version"] == "v1"
    with pytest.raises(ServingError, match="no current deployment"):
        deploy.rollback_target({"models": {"llama": {"previous": {"version": "v1"}}}}, "llama", "", True)


def _awq_70b() -> dict:
    """Llama-3.1-70B as hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 publishes it: the same
    architecture with 4-bit AWQ weights (GEMM kernels, group size 128) in float16."""
    awq = config("meta-llama__Meta-Llama-3.1-70B")
    awq["torch_dtype"] = "float16"
    awq["quantization_config"] = {
        "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm",
        "modules_to_not_convert": None,
    }  # fmt: skip
    return awq


def test_70b_awq_on_two_24gib_hosts_is_one_stage_per_host_and_each_member_gets_its_arguments() -> None:
    spec = group_gpu_spec("g", [(f"n{i}", RTX4090) for i in range(2)])
    result = plan_group("g", _awq_70b(), spec, {"vllm_version": "0.34.0"})
    assert result["feasible"], result["errors"]
    assert (result["tensor_parallel_size"], result["pipeline_parallel_size"], result["quantization"]) == (
        1,
        2,
        "awq",
    )
    # about 37 GiB of 4-bit weights over 2 x 24 GiB leave a short context: capped, and said so
    assert any("max_model_len capped at" in w for w in result["warnings"]), result["warnings"]
    planned = result["vllm_args"]
    assert planned[:4] == ["--tensor-parallel-size", "1", "--pipeline-parallel-size", "2"]
    assert 0 < int(planned[planned.index("--max-model-len") + 1]) < 131072
    command = deploy.vllm_command("/models/llama-70b-awq", "llama-70b", "10.0.0.1", 8000, planned)
    group = groups.serving_groups(["llama_a"], INVENTORY)[0]
    lead = groups.member_launch(command, group, "a0", "10.0.0.1", "10.0.0.1", "0.34.0")
    follow = groups.member_launch(command, group, "a1", "10.0.0.1", "10.0.0.2", "0.34.0")
    base = [
        "/models/llama-70b-awq",
        "--served-model-name",
        "llama-70b",
        "--host",
        "10.0.0.1",
        "--port",
        "8000",
    ]
    joined = ["--distributed-executor-backend", "mp", "--nnodes", "2"]
    rendezvous = ["--master-addr", "10.0.0.1", "--master-port", "29501"]
    assert lead["command"] == [*base, *planned, *joined, "--node-rank", "0", *rendezvous]
    assert follow["command"] == [*base, *planned, *joined, "--node-rank", "1", *rendezvous, "--headless"]


def test_deepseek_v3_members_get_their_exact_arguments() -> None:
    result = _group_plan("deepseek-ai__DeepSeek-V3", H100X8, 2, {"vllm_version": "0.34.0"})
    assert result["feasible"], result["errors"]
    planned = result["vllm_args"]
    assert planned[:4] == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
    # its full 163,840-token context fits once split over 16 H100s
    assert planned[planned.index("--max-model-len") + 1] == "163840"
    command = deploy.vllm_command("/models/deepseek-v3", "deepseek-v3", "10.0.0.1", 8000, planned)
    group = groups.serving_groups(["llama_b"], INVENTORY)[0]
    lead = groups.member_launch(command, group, "b0", "10.0.0.1", "10.0.0.1", "0.34.0")
    follow = groups.member_launch(command, group, "b1", "10.0.0.1", "10.0.0.2", "0.34.0")
    tail = ["--distributed-executor-backend", "mp", "--nnodes", "2"]
    port = lead["command"][lead["command"].index("--master-port") + 1]
    rendezvous = ["--master-addr", "10.0.0.1", "--master-port", port]
    assert lead["command"] == [*command, *tail, "--node-rank", "0", *rendezvous]
    assert follow["command"] == [*command, *tail, "--node-rank", "1", *rendezvous, "--headless"]
    assert command[:7] == ["/models/deepseek-v3", "--served-model-name", "deepseek-v3", "--host", "10.0.0.1",
                           "--port", "8000"]  # fmt: skip
    assert (lead["role"], follow["role"]) == ("leader", "follower")


@pytest.mark.parametrize(
    ("hvars", "backend"),
    [
        ({}, "mp"),  # vllm_server_vllm_version's default: the fleet's release
        ({"vllm_fleet_vllm_version": "0.11.2"}, "ray"),
        ({"vllm_fleet_vllm_version": "0.34.0", "vllm_server_vllm_version": "0.11.2"}, "ray"),
    ],
)
def test_group_of_host_launches_with_the_version_the_host_runs(hvars: dict, backend: str) -> None:
    spec = {
        "vllm_fleet_serving_groups": ["pair"],
        "groups": {"pair": ["n1", "n2"], "gpu_nodes": ["n1", "n2"]},
    }
    found = groups.group_of_host({**spec, **hvars}, "n2")
    assert (found["rank"], found["rank0"], found["backend"]) == (1, "n1", backend)
