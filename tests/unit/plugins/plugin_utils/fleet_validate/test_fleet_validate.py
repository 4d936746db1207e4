"""The pure inventory checker (plugins/plugin_utils/fleet_validate), without ansible-playbook."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_validate as ic
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.images import tag_version

ROOT = Path(__file__).resolve().parents[5]
CAT = ic.load_catalogue()
KEY = "backend-key-0123456789abcdef"
GROUPS = {
    "all": ["gw", "g1", "g2"],
    "gpu_nodes": ["g1", "g2"],
    "h100": ["g1", "g2"],
    "gateways": ["gw"],
    "ungrouped": [],
}
CHILDREN = {"all": ["gpu_nodes", "gateways"], "gpu_nodes": ["h100"]}
WEIGHTS = [{"name": "m", "source": "huggingface", "repo_id": "org/m", "revision": "main"}]
GATEWAY = {
    "gateway_client_keys": [{"name": "a", "key": "client-key-0123456789"}],
    "gateway_rate_limit_tiers": {"default": {"rate": "10r/s", "burst": 20}},
}


def fleet(**changes):
    common = {"vllm_fleet_api_key": KEY, "model_weights_models": WEIGHTS}
    gpu = {**common, "vllm_server_models": [{"name": "m", "path": "/srv/models/org/m/main", "port": 8000}]}
    hosts = {"gw": {**common, **GATEWAY}, "g1": dict(gpu), "g2": dict(gpu)}
    for host, values in changes.items():
        hosts[host].update(values)
    return hosts


def check(*args, **kwargs):
    found, _planned = ic.check_inventory(*args, **kwargs)
    return found


def problems(hosts, groups=GROUPS):
    return [(p.host, p.variable) for p in check(hosts, groups, CHILDREN, CAT)]


def test_a_consistent_fleet_has_no_problem():
    assert problems(fleet()) == []


def test_the_catalogue_knows_the_roles_options_and_what_the_roles_read():
    assert {"vllm_server_models", "gateway_client_keys", "vllm_fleet_api_key"} <= set(CAT.options)
    assert "vllm_image_cuda_version" in CAT.known  # read by roles, not in an argument_specs
    assert not set(ic.REMOVED) & CAT.known
    assert CAT.governs("vllm_server_modles") and not CAT.governs("lab_gpu_profile")


def test_values_that_cannot_be_judged_here_are_not_judged():
    vault = ic.Unresolved("vault-encrypted")
    lookup = ic.Unresolved("could not find the file refs/main")
    hosts = fleet(
        g1={"vllm_fleet_api_key": vault, "vllm_server_models": [{"name": "m", "path": lookup, "port": 8000}]},
        gw={"gateway_client_keys": [{"name": "a", "key": vault}]},
    )
    assert problems(hosts) == []


def test_a_reference_to_an_undefined_variable_is_named():
    hosts = fleet(g1={"vllm_server_image": ic.Unresolved("undefined", "my_image")})
    assert problems(hosts) == [("g1", "vllm_server_image")]
    nested = [{"name": "m", "path": ic.Unresolved("undefined", "models_root"), "port": 8000}]
    assert problems(fleet(g2={"vllm_server_models": nested})) == [("g2", "vllm_server_models[0].path")]
    hosts = fleet(gw={"vllm_fleet_api_key": ic.Unresolved("undefined", "lab_backend_api_key")})
    [found] = check(hosts, GROUPS, CHILDREN, CAT)
    assert "lab_backend_api_key" in found.what and found.fix.startswith("define lab_backend_api_key")


@pytest.mark.parametrize(
    ("host", "values", "variable", "fix"),
    [
        (
            "g1",
            {"vllm_server_models": [{"name": "m", "path": "/p", "port": "80x"}]},
            "vllm_server_models[0].port",
            "give an integer",
        ),
        (
            "g1",
            {"vllm_server_models": [{"name": "m", "path": "/p", "prot": 8000}]},
            "vllm_server_models[0].prot",
            "rename prot to port",
        ),
        (
            "g1",
            {"vllm_server_models": [{"name": "m", "path": "/p"}]},
            "vllm_server_models[0].port",
            "add port (an integer)",
        ),
        ("g1", {"vllm_server_image_source": "pul"}, "vllm_server_image_source", "use one of pull, local"),
        ("g1", {"vllm_server_env": ["A=1"]}, "vllm_server_env", "give a dict"),
        ("g1", {"vllm_server_image": ["img"]}, "vllm_server_image", "give a string"),
        (
            "gw",
            {"gateway_rate_limit_tiers": {"default": ["10r/s", 20]}},
            "gateway_rate_limit_tiers.default",
            "write it as default:",
        ),
        (
            "gw",
            {"gateway_client_keys": [{"name": "a", "key": "k", "tier": "gold"}]},
            "gateway_client_keys[0].key",
            "set a new key for a",
        ),
        ("g1", {"vllm_server_modles": []}, "vllm_server_modles", "rename it to vllm_server_models"),
        (
            "g1",
            {"gateway_backend_api_key": KEY},
            "gateway_backend_api_key",
            "rename gateway_backend_api_key to vllm_fleet_api_key",
        ),
        (
            "g1",
            {"model_weights_models": [{**WEIGHTS[0], "source": "hugginface"}]},
            "model_weights_models[0].source",
            "use one of huggingface",
        ),
        (
            "g1",
            {"model_weights_models": [{**WEIGHTS[0], "revision": ""}]},
            "model_weights_models[0].revision",
            "pin revision",
        ),
        (
            "g1",
            {"model_weights_models": []},
            "vllm_server_models[0].name",
            "add {name: m, source, repo_id, revision}",
        ),
        (
            "g1",
            {"vllm_server_models": [{"name": "m", "path": "/p", "port": 9100}]},
            "vllm_server_models[0].port",
            "give vllm_server_models[0].port (m) a port",
        ),
    ],
)
def test_each_problem_names_the_variable_and_the_fix(host, values, variable, fix):
    found = [p for p in check(fleet(**{host: values}), GROUPS, CHILDREN, CAT) if p.host == host]
    assert variable in [p.variable for p in found], found
    assert any(fix in p.fix for p in found if p.variable == variable), found


def test_an_empty_gpu_group_and_an_empty_inventory():
    groups = {**GROUPS, "a100": []}
    children = {**CHILDREN, "gpu_nodes": ["h100", "a100"]}
    assert [p.variable for p in check(fleet(), groups, children, CAT)] == ["a100"]
    assert "gpu_nodes" in [p.variable for p in check({}, {"all": [], "ungrouped": []}, {}, CAT)]


def test_a_group_variable_is_told_once_at_the_file_that_sets_it():
    inventory = ROOT / "inventories" / "lab"
    hosts = {
        "lab-gpu1": {"vllm_server_modles": []},
        "lab-gpu2": {"vllm_server_modles": []},
    }
    groups = {"all": list(hosts), "gpu_nodes": list(hosts), "ungrouped": []}
    found, _children = ic.inventory_sources([str(inventory)])
    found[("gpu_nodes", "vllm_server_modles")] = str(
        inventory / "group_vars" / "gpu_nodes" / "vllm_server.yml"
    )
    host_groups = {h: ["gpu_nodes", "all"] for h in hosts}
    where = ic.where_from(found, host_groups, groups, str(ROOT))
    problems = [p for p in check(hosts, groups, {}, CAT) if p.variable == "vllm_server_modles"]
    assert len(problems) == 2
    lines = ic.format_problems(problems, where, groups)
    assert lines == [
        "inventories/lab/group_vars/gpu_nodes/vllm_server.yml: vllm_server_modles: is not a variable of any "
        "vllm-fleet role; did you mean vllm_server_models? Fix: rename it to vllm_server_models"
    ]


def test_the_sources_of_the_lab_inventory():
    found, children = ic.inventory_sources([str(ROOT / "inventories" / "lab")])
    assert found[("gpu_nodes", "vllm_server_models")].endswith("group_vars/gpu_nodes/vllm_server.yml")
    assert found[("all", "vllm_fleet_api_key")].endswith("group_vars/all/lab.yml")
    assert found[("lab-gpu1", "lab_gpu_profile")].endswith("hosts.yml")
    assert found[("lab_h100", "vllm_server_models")].endswith("group_vars/lab_h100/vllm_server.yml")
    assert set(children["gpu_nodes"]) == {"lab_h200", "lab_h100", "lab_l4"}


@pytest.mark.parametrize(
    ("values", "variable", "fix"),
    [
        ({"gateway_affinity": {"key": "cookie"}}, "gateway_affinity.key", "use one of none, header"),
        (
            {"gateway_affinity": {"key": "header", "header": "X Id"}},
            "gateway_affinity.header",
            "X-Session-Id",
        ),
        (
            {"gateway_affinity_models": {"m": {"key": "prompt_prefix", "prompt_prefix_chars": 0}}},
            "gateway_affinity_models['m'].prompt_prefix_chars",
            "below the length of a conversation's first turn",
        ),
    ],
)
def test_cache_affinity_problems(values, variable, fix):
    found = [p for p in check(fleet(gw=values), GROUPS, CHILDREN, CAT) if p.host == "gw"]
    assert variable in [p.variable for p in found], found
    assert any(fix in p.fix for p in found if p.variable == variable), found


def test_cache_affinity_on_a_header_is_fine():
    assert (
        problems(
            fleet(
                gw={"gateway_affinity": {"key": "header"}, "gateway_affinity_models": {"m": {"key": "user"}}}
            )
        )
        == []
    )


# --- LoRA adapters --------------------------------------------------------------------------------

ADAPTER_WEIGHTS = {"name": "m-sql", "source": "huggingface", "repo_id": "org/m-sql-lora", "revision": "abc1"}


def _with_adapter(adapter, weights=(ADAPTER_WEIGHTS,)):
    served = [{"name": "m", "path": "/srv/models/org/m/main", "port": 8000, "adapters": [adapter]}]
    return fleet(
        g1={"vllm_server_models": served, "model_weights_models": [*WEIGHTS, *weights]},
        g2={"model_weights_models": [*WEIGHTS, *weights]},
        gw={"model_weights_models": [*WEIGHTS, *weights]},
    )


def test_an_adapter_declared_with_its_weights_has_no_problem():
    assert problems(_with_adapter({"name": "m-sql", "repo": "org/m-sql-lora", "revision": "abc1"})) == []


@pytest.mark.parametrize(
    ("adapter", "weights", "variable", "words"),
    [
        (
            {"name": "m-sql", "repo": "org/m-sql-lora", "revison": "abc1"},
            (ADAPTER_WEIGHTS,),
            "vllm_server_models[0].adapters[0].revison",
            "rename revison to revision",
        ),
        (
            {"name": "m-sq", "repo": "org/m-sql-lora", "revision": "abc1"},
            (ADAPTER_WEIGHTS,),
            "vllm_server_models[0].adapters[0].name",
            "add {name: m-sq, source: huggingface, repo_id: org/m-sql-lora, revision: abc1}",
        ),
        (
            {"name": "m-sql", "repo": "org/m-sql-lora", "revision": "def456"},
            (ADAPTER_WEIGHTS,),
            "vllm_server_models[0].adapters[0].revision",
            "serve what the weights stage fetches (revision abc1)",
        ),
    ],
)
def test_a_bad_adapter_is_one_line_naming_the_variable_and_the_fix(adapter, weights, variable, words):
    found = [p for p in check(_with_adapter(adapter, weights), GROUPS, CHILDREN, CAT) if p.host == "g1"]
    assert [p.variable for p in found] == [variable]
    assert words in found[0].fix
    if variable.endswith(".name"):
        assert "did you mean m-sql?" in found[0].what


def test_a_gpu_group_whose_image_tag_disagrees_with_its_version_is_reported():
    hosts = fleet(
        g1={"vllm_server_image": "vllm/vllm-openai:v0.32.0", "vllm_server_vllm_version": "0.34.0"},
        g2={"vllm_server_image": "vllm/vllm-openai:v0.32.0", "vllm_server_vllm_version": "0.32.0"},
    )
    found = [p for p in check(hosts, GROUPS, CHILDREN, CAT) if p.variable == "vllm_server_vllm_version"]
    assert [p.host for p in found] == ["g1"]
    assert "tagged 0.32.0" in found[0].what and 'vllm_server_vllm_version: "0.32.0"' in found[0].fix


def test_a_group_image_without_its_version_is_held_to_the_fleet_version():
    # the group names an image of another release but keeps the fleet's (default) version
    hosts = fleet(g1={"vllm_server_image": "vllm/vllm-openai:v0.31.0"})
    found = [(p.host, p.variable) for p in check(hosts, GROUPS, CHILDREN, CAT)]
    assert found == [("g1", "vllm_server_vllm_version")]
    # the fleet's own defaults agree with each other, and so does an untagged build
    assert problems(fleet(g1={"vllm_server_image": "local/vllm:canary"})) == []


def test_the_lab_pins_its_cpu_build_apart_from_the_fleet_default():
    import yaml

    fleet_defaults = yaml.safe_load((ROOT / "roles/vllm_fleet/defaults/main.yml").read_text())
    lab = yaml.safe_load((ROOT / "inventories/lab/group_vars/gpu_nodes/vllm_server.yml").read_text())
    assert tag_version(fleet_defaults["vllm_fleet_vllm_image"]) == fleet_defaults["vllm_fleet_vllm_version"]
    assert (lab["vllm_server_image"], lab["vllm_server_vllm_version"]) == (
        "vllm-fleet/vllm-cpu:0.32.0",
        "0.32.0",
    )


# --- issue #29: template errors, extra vars, adapters, flags, GPU groups --------------------------


def test_a_template_that_cannot_render_is_named_and_not_replaced_by_the_fleet_image():
    broken = ic.Unresolved("template error", error="Syntax error in template: No filter named 'trimm'")
    hosts = fleet(g1={"vllm_server_image": broken}, gw={"vllm_fleet_api_key": broken})
    found = check(hosts, GROUPS, CHILDREN, CAT)
    assert sorted((p.host, p.variable) for p in found) == [
        ("g1", "vllm_server_image"),
        ("gw", "vllm_fleet_api_key"),
    ]
    assert all("No filter named 'trimm'" in p.what and "correct the template" in p.fix for p in found)


def test_extra_vars_win_over_the_files_and_are_named():
    inventory = ROOT / "inventories" / "lab"
    hosts = {"lab-gateway": {"vllm_fleet_api_key": "short"}}
    groups = {"all": ["lab-gateway"], "gateways": ["lab-gateway"], "ungrouped": []}
    lines, _ = ic.validate_inventory(hosts, groups, [str(inventory)], str(ROOT), CAT)
    assert [line.split(": ", 1)[0] for line in lines if ": vllm_fleet_api_key: " in line] == [
        "inventories/lab/group_vars/all/lab.yml"
    ]
    lines, _ = ic.validate_inventory(
        hosts, groups, [str(inventory)], str(ROOT), CAT, extra_vars={"vllm_fleet_api_key"}
    )
    [line] = [line for line in lines if ": vllm_fleet_api_key: " in line]
    assert line.startswith("extra vars (-e): vllm_fleet_api_key: ")
    assert "Fix: pass a valid vllm_fleet_api_key in the extra vars" in line


@pytest.mark.parametrize(
    ("adapters", "variable", "fix"),
    [
        (
            [{"name": "m-sql", "path": "/a"}, {"name": "m-sql", "path": "/b"}],
            "vllm_server_models[0].adapters[1].name",
            "give every served model and adapter of a host its own name",
        ),
        ([{"name": "m", "path": "/a"}], "vllm_server_models[0].adapters[0].name", "a name of its own"),
        (
            [{"name": "m-sql", "path": "/trained-on-qwen"}],
            "vllm_server_models[0].adapters[0]",
            "serve the adapter under a model of Qwen/Qwen2.5-7B",
        ),
    ],
)
def test_adapter_names_and_base_models(adapters, variable, fix):
    served = [{"name": "m", "path": "/srv/models/org/m/main", "port": 8000, "adapters": adapters}]
    configs = {
        "/trained-on-qwen/adapter_config.json": '{"base_model_name_or_path": "Qwen/Qwen2.5-7B", "r": 8}',
        "/a/adapter_config.json": '{"base_model_name_or_path": "ORG/M", "r": 8}',  # case aside, org/m
    }
    found, _ = ic.check_inventory(
        fleet(g1={"vllm_server_models": served}), GROUPS, CHILDREN, CAT, read=configs.get
    )
    assert [(p.variable, fix in p.fix) for p in found if p.host == "g1"] == [(variable, True)]


def test_an_adapter_whose_config_is_only_on_the_hosts_is_not_judged():
    served = [{"name": "m", "path": "/p", "port": 8000, "adapters": [{"name": "a", "path": "/nowhere-here"}]}]
    found, _ = ic.check_inventory(
        fleet(g1={"vllm_server_models": served}), GROUPS, CHILDREN, CAT, read=lambda p: None
    )
    assert found == []


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["--max-num-seqs", "32"], "overrides.max_num_seqs instead"),
        (["--tensor-parallel-size=2"], "overrides.tensor_parallel_size instead"),
        (["--port", "9000"], "it comes from vllm_server_models[].port"),
        (["--nnodes", "2"], "vllm_fleet_serving_groups sets it"),
        (["--tool-call-parser", "hermes"], "set vllm_server_models[0].tool_call_parser"),
    ],
)
def test_extra_args_may_not_set_the_flags_the_planner_or_the_role_own(args, fix):
    served = [{"name": "m", "path": "/p", "port": 8000, "extra_args": args}]
    found = [p for p in check(fleet(g1={"vllm_server_models": served}), GROUPS, CHILDREN, CAT)]
    assert [p.variable for p in found] == ["vllm_server_models[0].extra_args"] and fix in found[0].fix
    ok = [{"name": "m", "path": "/p", "port": 8000, "extra_args": ["--enable-prefix-caching"]}]
    assert problems(fleet(g1={"vllm_server_models": ok})) == []


@pytest.mark.parametrize(
    ("setting", "variable", "fix"),
    [
        ({"tool_call_parser": "herms"}, "vllm_server_models[0].tool_call_parser", "hermes"),
        ({"reasoning_parser": "deepseek_r2"}, "vllm_server_models[0].reasoning_parser", "deepseek_r1"),
    ],
)
def test_a_parser_the_release_lacks_is_refused_before_any_host(setting, variable, fix):
    served = [{"name": "m", "path": "/p", "port": 8000, **setting}]
    values = {"vllm_server_models": served, "vllm_server_vllm_version": "0.32.0"}
    # (the fleet's default image names another release: that problem is told apart)
    found = check(fleet(g1=values), GROUPS, CHILDREN, CAT)
    found = [p for p in found if p.variable != "vllm_server_vllm_version"]
    assert [p.variable for p in found] == [variable]
    assert "vLLM 0.32.0 has no" in found[0].what and fix in found[0].fix
    ok = [{"name": "m", "path": "/p", "port": 8000, "tool_call_parser": "hermes", "reasoning_parser": False}]
    values = {"vllm_server_models": ok, "vllm_server_vllm_version": "0.32.0"}
    assert [v for _host, v in problems(fleet(g1=values)) if v != "vllm_server_vllm_version"] == []


@pytest.mark.parametrize(
    ("spec", "overrides", "what"),
    [
        ({"method": "mtp", "num_speculative_tokens": 1}, {}, "vLLM 0.10.2 has no method 'mtp'"),
        (
            {
                "method": "draft_model",
                "num_speculative_tokens": 4,
                "model": "/d",
                "draft_tensor_parallel_size": 2,
            },
            {"tensor_parallel_size": 4},
            "takes 1 or the target's tensor parallel size (4)",
        ),
    ],
)
def test_a_speculative_method_or_draft_tp_the_release_refuses_is_refused_before_any_host(
    spec, overrides, what
):
    served = [{"name": "m", "path": "/p", "port": 8000, "speculative": spec, "overrides": overrides}]
    values = {"vllm_server_models": served, "vllm_server_vllm_version": "0.10.2"}
    found = [
        p for p in check(fleet(g1=values), GROUPS, CHILDREN, CAT) if p.variable != "vllm_server_vllm_version"
    ]
    assert [p.variable for p in found] == ["vllm_server_models[0].speculative"]
    assert what in found[0].what


@pytest.mark.parametrize(
    ("setting", "variable", "what"),
    [
        ({"kv_offload": 32}, "vllm_server_models[0].kv_offload", "has no --kv-offloading-backend"),
        ({"kv_offload": -4}, "vllm_server_models[0].kv_offload", "above 0 or 'auto'"),
        ({"sleep": 3}, "vllm_server_models[0].sleep", "must be 1"),
    ],
)
def test_a_kv_tier_or_sleep_level_vllm_cannot_take_is_refused_before_any_host(setting, variable, what):
    served = [{"name": "m", "path": "/p", "port": 8000, **setting}]
    values = {"vllm_server_models": served, "vllm_server_vllm_version": "0.11.0"}
    found = [
        p for p in check(fleet(g1=values), GROUPS, CHILDREN, CAT) if p.variable != "vllm_server_vllm_version"
    ]
    assert [p.variable for p in found] == [variable] and what in found[0].what
    ok = [{"name": "m", "path": "/p", "port": 8000, "kv_offload": "auto", "sleep": 1}]
    values = {"vllm_server_models": ok, "vllm_server_vllm_version": "0.32.0"}
    assert [v for _host, v in problems(fleet(g1=values)) if v != "vllm_server_vllm_version"] == []


def test_a_fixed_tier_the_containers_shm_cannot_hold_is_refused_before_any_host():
    served = [{"name": "m", "path": "/p", "port": 8000, "kv_offload": 32}]
    values = {
        "vllm_server_models": served,
        "vllm_server_vllm_version": "0.34.0",
        "vllm_server_ipc_mode": "private",
    }
    found = check(fleet(g1=values), GROUPS, CHILDREN, CAT)
    assert [(p.variable, p.host) for p in found] == [("vllm_server_models[0].kv_offload", "g1")]
    assert "16.0 GiB" in found[0].what and "vllm_server_shm_size to at least 33g" in found[0].fix
    # the host's IPC (the default), room enough, an auto size, or LMCache's own memory: nothing to refuse
    for more in (
        {"vllm_server_ipc_mode": "host"},
        {"vllm_server_shm_size": "40g"},
    ):
        assert check(fleet(g1={**values, **more}), GROUPS, CHILDREN, CAT) == []
    for tier in ("auto", {"size": 32, "backend": "lmcache"}):
        other = [{**served[0], "kv_offload": tier}]
        assert check(fleet(g1={**values, "vllm_server_models": other}), GROUPS, CHILDREN, CAT) == []
    bad = check(fleet(g1={**values, "vllm_server_shm_size": "lots"}), GROUPS, CHILDREN, CAT)
    assert [p.variable for p in bad] == ["vllm_server_shm_size"] and "'lots'" in bad[0].what


def test_gpu_indexes_beyond_the_host_where_its_gpus_are_known():
    served = [{"name": "m", "path": "/p", "port": 8000, "gpus": [0, 8]}]
    hosts = fleet(
        g1={"vllm_server_models": served, "lab_gpu_profile": "h200x1"}, g2={"vllm_server_models": served}
    )
    found = check(hosts, GROUPS, CHILDREN, CAT)
    # g2's GPUs are known to its hosts only (not judged), so the group h100 is not held to differ either
    assert [(p.host, p.variable) for p in found] == [("g1", "vllm_server_models[0].gpus[1]")]
    assert "list GPUs 0-0 of g1" in found[0].fix


@pytest.mark.parametrize(
    ("profile", "known"),
    [
        ("h200x1", ("H200", 1)),
        ("rtx4060tix2", ("RTX4060TI", 2)),
        ("h100x1-mig", ("H100", 1)),
        ("no-devices", None),
    ],
)
def test_the_gpus_of_a_lab_profile(profile, known):
    gpus = ic.gpus.host_gpus({"lab_gpu_profile": profile}, None)
    assert (gpus and (gpus.kind, gpus.count)) == known


def test_gpu_groups_one_type_each_and_one_group_per_host():
    groups = {**GROUPS, "a100": ["g2"]}
    children = {**CHILDREN, "gpu_nodes": ["h100", "a100"]}
    found = check(fleet(), groups, children, CAT)
    assert [(p.variable, p.host) for p in found] == [("a100", "")]
    assert "g2 is also in GPU group h100" in found[0].what
    hosts = fleet(g1={"lab_gpu_profile": "h100x8"}, g2={"lab_gpu_profile": "h200x1"})
    [mixed] = check(hosts, GROUPS, CHILDREN, CAT)
    assert mixed.variable == "h100" and "g1 has 8x H100" in mixed.what and "1x H200" in mixed.fix


def test_affinity_for_a_model_no_backend_serves():
    found = [
        p for p in check(fleet(gw={"gateway_affinity_models": {"n": {"key": "user"}}}), GROUPS, CHILDREN, CAT)
    ]
    assert [(p.host, p.variable) for p in found] == [("gw", "gateway_affinity_models['n']")]
    assert "key it by a served name (m)" in found[0].fix


def test_the_inventory_files_that_do_not_parse(tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    a:\n", encoding="utf-8")
    (tmp_path / "hosts.ini").write_text("[gpu_nodes]\na\n", encoding="utf-8")  # INI: not read as YAML
    (tmp_path / "group_vars" / "gpu_nodes").mkdir(parents=True)
    (tmp_path / "group_vars" / "gpu_nodes" / "x.yml").write_text("a: &x 1\nb: *x\nc: *y\n", encoding="utf-8")
    (tmp_path / "group_vars" / "all.yml").write_text("k: !vault |\n  $ANSIBLE_VAULT;1.1\n", encoding="utf-8")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "a.json").write_text('{"k": \t1}', encoding="utf-8")  # JSON may hold tabs
    assert ic.yaml_problems([str(tmp_path)], str(tmp_path)) == [
        "group_vars/gpu_nodes/x.yml: YAML parsing failed at line 3, column 4: found undefined alias 'y'. "
        "Fix: define the anchor (&name) above the alias in the same file (anchors do not reach across "
        "files), or write the value out"
    ]
