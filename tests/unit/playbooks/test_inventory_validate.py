"""playbooks/validate.yml over one-variable mutations of the lab and example inventories.

Each mutation is applied to a copy of an inventory; validate.yml must fail with one line that names the
variable and says the fix, contact no host and change nothing. The untouched inventories must pass.

validate.yml reports every problem of an inventory in one run, so mutations that cannot hide one another
share a copy and a run (``batches``); each keeps its own test and assertions. A mutation that an inventory's
other mistakes could hide runs alone: one given extra vars, or one that edits hosts.yml (the groups decide
which group_vars apply).
"""

from __future__ import annotations

import copy
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
LAB = "lab"
EXAMPLE = "example"


@dataclass(frozen=True)
class Mutation:
    ident: str
    inventory: str
    file: str  # relative to the inventory folder
    edit: Callable[[Any], Any]  # the file's YAML data -> mutated data (in place or returned)
    variable: str  # the exact variable (path) the problem line names
    fix: str  # text of the fix the line gives
    source: str = ""  # where the line says the value comes from (its label ends so), when asserted
    extra: tuple[str, ...] = ()  # extra ansible-playbook arguments (-e ...)
    not_named: tuple[str, ...] = ()  # variables no line may name (a wrong fix proposed elsewhere)


def setvar(name: str, value: Any) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        data[name] = value
        return data

    return edit


def rename(old: str, new: str) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        data[new] = data.pop(old)
        return data

    return edit


def item(name: str, index: int, key: str, value: Any = ..., drop: bool = False) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        entry = data[name][index]
        if drop:
            entry.pop(key)
        else:
            entry[key] = value
        return data

    return edit


def append(name: str, entry: dict[str, Any]) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        data[name].append(entry)
        return data

    return edit


def item_rename(name: str, index: int, old: str, new: str) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        entry = data[name][index]
        entry[new] = entry.pop(old)
        return data

    return edit


def adapter(index: int, key: str, value: Any) -> Callable[[Any], Any]:
    """Set a key of the lab model's adapter ``index``."""

    def edit(data: Any) -> Any:
        data["vllm_server_models"][0]["adapters"][index][key] = value
        return data

    return edit


def unchanged(data: Any) -> Any:
    return data


def lab_gpu_groups(h200: list[str], h100: list[str]) -> Callable[[Any], Any]:
    """The lab's GPU groups with these hosts (each keeps its variables); an empty list drops the group."""

    def edit(data: Any) -> Any:
        nodes = data["all"]["children"]["gpu_nodes"]["children"]
        hosts = {**nodes["lab_h200"]["hosts"], **nodes["lab_h100"]["hosts"]}
        for group, members in (("lab_h200", h200), ("lab_h100", h100)):
            if members:
                nodes[group] = {"hosts": {h: hosts[h] for h in members}}
            else:
                nodes.pop(group)
        return data

    return edit


def host_var_dropped(group: str, host: str, name: str) -> Callable[[Any], Any]:
    """hosts.yml of the example: drop a host variable of a host of a child group of gpu_nodes."""

    def edit(data: Any) -> Any:
        data["all"]["children"]["gpu_nodes"]["children"][group]["hosts"][host].pop(name)
        return data

    return edit


def empty_group(path: list[str]) -> Callable[[Any], Any]:
    def edit(data: Any) -> Any:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = {"hosts": {}}
        return data

    return edit


GPU_SERVER = "group_vars/gpu_nodes/vllm_server.yml"
EXTRA_VARS = "extra vars (-e)"
OTHER_BASE = str(ROOT / "tests" / "data" / "inventory" / "adapter-for-qwen")
GATEWAY = "group_vars/gateways/gateway.yml"
LAB_WEIGHTS = "group_vars/all/model_weights.yml"
LAB_KEY = "group_vars/all/lab.yml"
M = Mutation
MUTATIONS = [
    # the mistakes a new user made, one at a time
    M(
        "misspelt-models",
        LAB,
        GPU_SERVER,
        rename("vllm_server_models", "vllm_server_modles"),
        "vllm_server_modles",
        "rename it to vllm_server_models",
    ),
    M(
        "tier-as-list",
        LAB,
        GATEWAY,
        setvar("gateway_rate_limit_tiers", {"default": ["50r/s", 100]}),
        "gateway_rate_limit_tiers.default",
        "write it as default: {rate: 10r/s, burst: 20}",
    ),
    M(
        "served-not-declared",
        LAB,
        GPU_SERVER,
        item("vllm_server_models", 0, "name", "tiny-chat"),
        "vllm_server_models[0].name",
        "add {name: tiny-chat, source, repo_id, revision} to model_weights_models",
    ),
    M(
        "empty-gpu-group",
        EXAMPLE,
        "hosts.yml",
        empty_group(["all", "children", "gpu_nodes", "children", "a100_nodes"]),
        "a100_nodes",
        "add its hosts to a100_nodes, or remove the group",
    ),
    M(
        "removed-server-key",
        LAB,
        LAB_KEY,
        rename("vllm_fleet_api_key", "vllm_server_api_key"),
        "vllm_server_api_key",
        "rename vllm_server_api_key to vllm_fleet_api_key",
    ),
    M(
        "removed-gateway-key",
        LAB,
        LAB_KEY,
        rename("vllm_fleet_api_key", "gateway_backend_api_key"),
        "gateway_backend_api_key",
        "rename gateway_backend_api_key to vllm_fleet_api_key",
    ),
    M(
        "hub-misspelt",
        LAB,
        LAB_WEIGHTS,
        item("model_weights_models", 0, "source", "hugginface"),
        "model_weights_models[0].source",
        "use one of huggingface, modelscope, local",
    ),
    M(
        "empty-revision",
        LAB,
        LAB_WEIGHTS,
        item("model_weights_models", 0, "revision", ""),
        "model_weights_models[0].revision",
        "pin revision in model_weights_models[0] to a commit id",
    ),
    M(
        "key-undefined",
        LAB,
        LAB_KEY,
        setvar("vllm_fleet_api_key", "{{ lab_backend_api_key }}"),
        "vllm_fleet_api_key",
        "define lab_backend_api_key, or set vllm_fleet_api_key in group_vars/all from Vault",
    ),
    M(
        "port-not-int",
        LAB,
        GPU_SERVER,
        item("vllm_server_models", 0, "port", "8000x"),
        "vllm_server_models[0].port",
        "give an integer (roles/vllm_server/meta/argument_specs.yml)",
    ),
    M(
        "path-undefined",
        LAB,
        GPU_SERVER,
        item("vllm_server_models", 0, "path", "{{ lab_models_dir }}/tiny"),
        "vllm_server_models[0].path",
        "define lab_models_dir, or set vllm_server_models[0].path directly",
    ),
    # types, choices, required and unknown keys from the roles' argument_specs
    M(
        "http-port-word",
        LAB,
        GATEWAY,
        setvar("gateway_http_port", "eighty"),
        "gateway_http_port",
        "give an integer (roles/gateway/meta/argument_specs.yml)",
    ),
    M(
        "image-source-choice",
        LAB,
        GPU_SERVER,
        setvar("vllm_server_image_source", "locall"),
        "vllm_server_image_source",
        "use one of pull, local",
    ),
    M(
        "gpu-requests-bool",
        LAB,
        GPU_SERVER,
        setvar("vllm_server_gpu_requests", "maybe"),
        "vllm_server_gpu_requests",
        "give a boolean",
    ),
    M(
        "models-as-dict",
        LAB,
        GPU_SERVER,
        setvar("vllm_server_models", {"name": "tiny", "port": 8000}),
        "vllm_server_models",
        "give a list of dict",
    ),
    M(
        "model-key-typo",
        LAB,
        GPU_SERVER,
        item_rename("vllm_server_models", 0, "port", "prot"),
        "vllm_server_models[0].prot",
        "rename prot to port",
    ),
    M(
        "model-path-missing",
        LAB,
        GPU_SERVER,
        item("vllm_server_models", 0, "path", drop=True),
        "vllm_server_models[0].path",
        "add path (a string) to vllm_server_models[0]",
    ),
    M(
        "watchdog-timeout-str",
        LAB,
        GPU_SERVER,
        setvar("vllm_server_watchdog_timeout", "15s"),
        "vllm_server_watchdog_timeout",
        "give an integer",
    ),
    M(
        "ready-timeout-list",
        LAB,
        GPU_SERVER,
        setvar("vllm_server_ready_timeout_base", [600]),
        "vllm_server_ready_timeout_base",
        "give an integer",
    ),
    M(
        "bench-loads-elements",
        LAB,
        "group_vars/all/fleet_bench.yml",
        setvar("fleet_bench_loads", [1, 2, "four"]),
        "fleet_bench_loads[2]",
        "give a float",
    ),
    M(
        "doctor-scope-choice",
        LAB,
        "group_vars/all/fleet_doctor.yml",
        setvar("fleet_doctor_container_scope", "labeled"),
        "fleet_doctor_container_scope",
        "use one of all, labelled",
    ),
    M(
        "docker-source-choice",
        LAB,
        "group_vars/gpu_nodes/hosts.yml",
        setvar("docker_engine_source", "debian"),
        "docker_engine_source",
        "use one of docker, distro",
    ),
    M(
        "driver-manage-bool",
        LAB,
        "group_vars/gpu_nodes/hosts.yml",
        setvar("nvidia_driver_manage", "nope"),
        "nvidia_driver_manage",
        "give a boolean",
    ),
    M(
        "mount-enabled-bool",
        LAB,
        "group_vars/gpu_nodes/shared_storage.yml",
        setvar("shared_storage_mount_enabled", "off-ish"),
        "shared_storage_mount_enabled",
        "give a boolean",
    ),
    M(
        "monitoring-typo",
        LAB,
        "group_vars/monitoring/monitoring.yml",
        rename("monitoring_prometheus_scrape_interval", "monitoring_prometheus_scrape_intervall"),
        "monitoring_prometheus_scrape_intervall",
        "rename it to monitoring_prometheus_scrape_interval",
    ),
    M(
        "dcgm-typo",
        LAB,
        "group_vars/gpu_nodes/monitoring.yml",
        rename("dcgm_exporter_enabled", "dcgm_exporter_enable"),
        "dcgm_exporter_enable",
        "rename it to dcgm_exporter_enabled",
    ),
    # the backend key and the client keys
    M(
        "backend-key-short",
        LAB,
        LAB_KEY,
        setvar("vllm_fleet_api_key", "short"),
        "vllm_fleet_api_key",
        "set vllm_fleet_api_key in group_vars/all from Vault",
    ),
    M(
        "client-keys-empty",
        LAB,
        GATEWAY,
        setvar("gateway_client_keys", []),
        "gateway_client_keys",
        "add at least one {name, key}",
    ),
    M(
        "client-key-empty",
        LAB,
        GATEWAY,
        item("gateway_client_keys", 0, "key", ""),
        "gateway_client_keys[0].key",
        "set a new key for lab-demo from Vault",
    ),
    M(
        "client-key-missing",
        LAB,
        GATEWAY,
        item("gateway_client_keys", 1, "key", drop=True),
        "gateway_client_keys[1].key",
        "add key (a string) to gateway_client_keys[1]",
    ),
    M(
        "client-key-spaces",
        LAB,
        GATEWAY,
        item("gateway_client_keys", 0, "key", "lab client key with spaces"),
        "gateway_client_keys[0].key",
        "set a new key for lab-demo from Vault",
    ),
    M(
        "client-name-duplicate",
        LAB,
        GATEWAY,
        item("gateway_client_keys", 1, "name", "lab-demo"),
        "gateway_client_keys[1].name",
        "give every client key its own name",
    ),
    M(
        "client-key-duplicate",
        LAB,
        GATEWAY,
        item("gateway_client_keys", 1, "key", "lab-client-key-demo-0123456789"),
        "gateway_client_keys[1].key",
        "give every client its own key",
    ),
    M(
        "client-tier-unknown",
        LAB,
        GATEWAY,
        item("gateway_client_keys", 0, "tier", "gold"),
        "gateway_client_keys[0].tier",
        "use one of default, or add gold to gateway_rate_limit_tiers",
    ),
    M(
        "rate-format",
        LAB,
        GATEWAY,
        setvar("gateway_rate_limit_tiers", {"default": {"rate": "50/s", "burst": 100}}),
        "gateway_rate_limit_tiers.default.rate",
        "set rate: <N>r/s or <N>r/m",
    ),
    M(
        "burst-word",
        LAB,
        GATEWAY,
        setvar("gateway_rate_limit_tiers", {"default": {"rate": "50r/s", "burst": "lots"}}),
        "gateway_rate_limit_tiers.default.burst",
        "set burst: <N> (0 or more)",
    ),
    M(
        "example-client-key-undefined",
        EXAMPLE,
        GATEWAY,
        item("gateway_client_keys", 0, "key", "{{ vault_client_key_team_serch }}"),
        "gateway_client_keys[0].key",
        "define vault_client_key_team_serch (from Vault), or remove this client",
    ),
    # weights: hubs, revisions, duplicates
    M(
        "weights-duplicate-name",
        LAB,
        LAB_WEIGHTS,
        append(
            "model_weights_models",
            {"name": "tiny", "source": "huggingface", "repo_id": "vllm-fleet-lab/tiny2", "revision": "main"},
        ),
        "model_weights_models[4].name",
        "give every model its own name",
    ),
    M(
        "weights-repo-id",
        LAB,
        LAB_WEIGHTS,
        item("model_weights_models", 0, "repo_id", "tiny"),
        "model_weights_models[0].repo_id",
        "set repo_id: ORG/NAME",
    ),
    M(
        "weights-root-relative",
        LAB,
        LAB_WEIGHTS,
        setvar("model_weights_root", "srv/vllm-fleet-lab/models"),
        "model_weights_root",
        "set it to the shared storage path",
    ),
    M(
        "weights-revision-int",
        LAB,
        LAB_WEIGHTS,
        item("model_weights_models", 0, "revision", 1234567),
        "model_weights_models[0].revision",
        'quote it as a string: revision: "1234567"',
    ),
    M(
        "example-revision-missing",
        EXAMPLE,
        LAB_WEIGHTS,
        item("model_weights_models", 0, "revision", drop=True),
        "model_weights_models[0].revision",
        "pin revision in model_weights_models[0]",
    ),
    M(
        "example-hub-modelscope-typo",
        EXAMPLE,
        LAB_WEIGHTS,
        item("model_weights_models", 2, "source", "modelscpe"),
        "model_weights_models[2].source",
        "use one of huggingface, modelscope, local",
    ),
    M(
        "example-served-revision",
        EXAMPLE,
        "group_vars/h100_nodes/vllm_server.yml",
        item("vllm_server_models", 0, "revision", "main"),
        "vllm_server_models[0].revision",
        "serve the revision the weights stage fetches (945c8663693130f8be2ee66210e062158b2a9693)",
    ),
    # ports of one host, names of one host
    M(
        "port-collides-node-exporter",
        LAB,
        GPU_SERVER,
        item("vllm_server_models", 0, "port", 9100),
        "vllm_server_models[0].port",
        "give vllm_server_models[0].port (tiny) a port no other service of lab-gpu1 uses",
    ),
    M(
        "gateway-port-collides",
        LAB,
        GATEWAY,
        setvar("gateway_http_port", 8089),
        "nginx_exporter_stub_status_port",
        "give nginx_exporter_stub_status_port a port no other service of lab-gateway uses",
    ),
    M(
        "example-served-duplicate",
        EXAMPLE,
        "group_vars/rtx4090_nodes/vllm_server.yml",
        append(
            "vllm_server_models",
            {"name": "qwen2.5-7b-instruct", "path": "/srv/models/Qwen/x/y", "port": 8001},
        ),
        "vllm_server_models[1].name",
        "give every model of a host its own name",
    ),
    # groups and the example's other variables
    M(
        "example-plan-group-typo",
        EXAMPLE,
        "group_vars/all/fleet_plan.yml",
        item("fleet_plan_models", 0, "group", "rtx4090_node"),
        "fleet_plan_models[0].group",
        "name a child group of gpu_nodes",
    ),
    M(
        "example-facts-source-choice",
        EXAMPLE,
        "group_vars/all/fleet_plan.yml",
        setvar("fleet_plan_facts_source", "livee"),
        "fleet_plan_facts_source",
        "use one of live, cache",
    ),
    M(
        "example-tls-bool",
        EXAMPLE,
        GATEWAY,
        setvar("gateway_tls_enabled", "sure"),
        "gateway_tls_enabled",
        "give a boolean",
    ),
    M(
        "example-reboot-choice",
        EXAMPLE,
        "group_vars/gpu_nodes/hosts.yml",
        setvar("nvidia_driver_reboot", "always"),
        "nvidia_driver_reboot",
        "use one of never, if_needed",
    ),
    M(
        "example-plan-options-list",
        EXAMPLE,
        GPU_SERVER,
        setvar("vllm_server_plan_options", ["workload=chat"]),
        "vllm_server_plan_options",
        "give a dict",
    ),
    M(
        "example-driver-typo",
        EXAMPLE,
        "group_vars/gpu_nodes/hosts.yml",
        rename("nvidia_driver_branch", "nvidia_driver_brnach"),
        "nvidia_driver_brnach",
        "rename it to nvidia_driver_branch",
    ),
    # the example's serving group (two 8xH100 hosts, one replica of Llama-3.1-405B FP8)
    M(
        "example-serving-group-typo",
        EXAMPLE,
        "group_vars/all/vllm_fleet.yml",
        setvar("vllm_fleet_serving_groups", [{"group": "llama405b_node", "backend": "auto"}]),
        "vllm_fleet_serving_groups[0]",
        "name a child group of gpu_nodes",
    ),
    M(
        "example-serving-group-rank0-address",
        EXAMPLE,
        "hosts.yml",
        host_var_dropped("llama405b_nodes", "gpu-h100-05.dc1.example.com", "vllm_fleet_internal_address"),
        "vllm_fleet_internal_address",
        "set vllm_fleet_internal_address (or vllm_server_listen_address) for gpu-h100-05.dc1.example.com",
    ),
    M(
        "example-backend-group",
        EXAMPLE,
        GATEWAY,
        setvar("gateway_backend_group", "gpu_node"),
        "gateway_backend_group",
        "set it to the group of the serving hosts (gpu_nodes)",
    ),
    # issue #29: what passed validate, or was blamed on the wrong file
    M(
        "key-template-error",
        LAB,
        LAB_KEY,
        setvar("vllm_fleet_api_key", "{{ 'lab-backend-key-0123456789abcdef' | trimm }}"),
        "vllm_fleet_api_key",
        "correct the template of vllm_fleet_api_key",
        source=LAB_KEY,
    ),
    M(
        "image-template-error",
        LAB,
        GPU_SERVER,
        setvar("vllm_server_image", "{{ 'vllm-fleet/vllm-cpu:0.32.0' | trimm }}"),
        "vllm_server_image",
        "correct the template of vllm_server_image",
        source=GPU_SERVER,
        not_named=("vllm_server_vllm_version",),  # not held to the fleet's default image
    ),
    M(
        "key-short-extra-vars",
        LAB,
        LAB_KEY,
        unchanged,
        "vllm_fleet_api_key",
        "pass a valid vllm_fleet_api_key in the extra vars",
        source=EXTRA_VARS,
        extra=("-e", "vllm_fleet_api_key=short"),
    ),
    M(
        "misspelt-extra-vars",
        LAB,
        LAB_KEY,
        unchanged,
        "vllm_server_modles",
        "rename it to vllm_server_models in the extra vars (-e, or the AWX credential giving it)",
        source=EXTRA_VARS,
        extra=("-e", '{"vllm_server_modles": []}'),
    ),
    M(
        "adapter-duplicate-name",
        LAB,
        GPU_SERVER,
        adapter(1, "name", "tiny-lora-a"),
        "vllm_server_models[0].adapters[1].name",
        "give every served model and adapter of a host its own name",
        source=GPU_SERVER,
    ),
    M(
        "adapter-named-as-base",
        LAB,
        GPU_SERVER,
        adapter(0, "name", "tiny"),
        "vllm_server_models[0].adapters[0].name",
        "give the adapter a name of its own",
        source=GPU_SERVER,
    ),
    M(
        "adapter-other-base-model",
        LAB,
        GPU_SERVER,
        adapter(0, "path", OTHER_BASE),
        "vllm_server_models[0].adapters[0]",
        "serve the adapter under a model of Qwen/Qwen2.5-7B-Instruct, or use an adapter trained for "
        "vllm-fleet-lab/tiny",
        source=GPU_SERVER,
    ),
    M(
        "affinity-unserved-model",
        LAB,
        GATEWAY,
        setvar("gateway_affinity_models", {"tiny-chat": {"key": "user"}}),
        "gateway_affinity_models['tiny-chat']",
        "key it by a served name (tiny, tiny-embed, tiny-lora-a, tiny-lora-b)",
        source=GATEWAY,
    ),
    M(
        "gpu-group-mixes-gpus",
        LAB,
        "hosts.yml",
        lab_gpu_groups(["lab-gpu1", "lab-gpu2"], []),
        "lab_h200",
        # "8x H100" from lab_gpu_profile, "8x NVIDIA H100 80GB HBM3" once a lab run has cached GPU facts
        "give the hosts with 8x",
        source="hosts.yml",
    ),
    M(
        "host-in-two-gpu-groups",
        LAB,
        "hosts.yml",
        lab_gpu_groups(["lab-gpu1", "lab-gpu2"], ["lab-gpu2"]),
        "lab_h100",
        "keep lab-gpu2 in one child group of gpu_nodes",
        source="hosts.yml",
    ),
    M(
        "extra-args-planner-flag",
        LAB,
        GPU_SERVER,
        item("vllm_server_models", 0, "extra_args", ["--max-num-seqs", "32"]),
        "vllm_server_models[0].extra_args",
        "put it in vllm_server_models[0].overrides.max_num_seqs instead",
        source=GPU_SERVER,
    ),
    M(
        "gpus-beyond-the-host",
        LAB,
        GPU_SERVER,
        item("vllm_server_models", 0, "gpus", [4]),
        "vllm_server_models[0].gpus[0]",
        "list GPUs 0-0 of lab-gpu1",
        source=GPU_SERVER,
    ),
]


class _Loader(yaml.SafeLoader):
    pass


def _vault(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return "!vault " + loader.construct_scalar(node)


_Loader.add_constructor("!vault", _vault)


def load_vars(path: Path) -> Any:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a SafeLoader
    assert not any(isinstance(v, str) and v.startswith("!vault ") for v in (data or {}).values())
    return data


def mutated_copy(mutations: list[Mutation], dest: Path) -> Path:
    """A copy of the mutations' inventory with each one's edit applied (those of one file in turn)."""
    folder = dest / mutations[0].inventory
    shutil.copytree(ROOT / "inventories" / mutations[0].inventory, folder)
    for file in dict.fromkeys(m.file for m in mutations):
        path = folder / file
        data = load_vars(path)
        for mutation in (m for m in mutations if m.file == file):
            data = mutation.edit(data)
        path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder


@functools.cache  # fits() asks it of every pair while the batches are made, at collection
def changed_keys(mutation: Mutation) -> frozenset[str]:
    """The top-level keys of its file a mutation adds, removes or changes."""
    before = load_vars(ROOT / "inventories" / mutation.inventory / mutation.file) or {}
    after = mutation.edit(copy.deepcopy(before)) or {}
    return frozenset(k for k in {*before, *after} if before.get(k, ...) != after.get(k, ...))


def runs_alone(mutation: Mutation) -> bool:
    return bool(mutation.extra) or mutation.file == "hosts.yml"


def fits(mutation: Mutation, batch: list[Mutation]) -> bool:
    """Whether a mutation can join a batch: no key of a file changed twice, no line it must not see."""
    if runs_alone(mutation) or runs_alone(batch[0]) or mutation.inventory != batch[0].inventory:
        return False
    return not any(
        (other.file == mutation.file and changed_keys(other) & changed_keys(mutation))
        or other.variable in mutation.not_named
        or mutation.variable in other.not_named
        for other in batch
    )


def batches(mutations: list[Mutation]) -> list[list[Mutation]]:
    """The mutations in batches validate.yml checks in one run, in the order of their first member."""
    found: list[list[Mutation]] = []
    for mutation in mutations:
        batch = next((b for b in found if fits(mutation, b)), None)
        if batch is None:
            found.append([mutation])
        else:
            batch.append(mutation)
    return found


def run_validate(inventory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
    )
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), "playbooks/validate.yml", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def problem_lines(stdout: str) -> list[str]:
    """The problem lines of the failed task (its msg, one problem a line)."""
    block = stdout.split("nothing was changed:\n", 1)
    if len(block) < 2:
        return []
    return [line for line in block[1].split("\nOrigin:", 1)[0].splitlines() if line.strip()]


def recap(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if re.match(r"^\S+\s+: ok=", line)]


@pytest.mark.parametrize("inventory", [LAB, EXAMPLE])
def test_the_inventories_pass(inventory):
    proc = run_validate(ROOT / "inventories" / inventory)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [line.split()[0] for line in recap(proc.stdout)] == ["localhost"]


def test_the_table_is_large_enough():
    assert len(MUTATIONS) >= 40
    assert len({m.ident for m in MUTATIONS}) == len(MUTATIONS)


BATCHES = batches(MUTATIONS)
BATCH_OF = {m.ident: i for i, batch in enumerate(BATCHES) for m in batch}


@pytest.fixture(scope="module")
def validated(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Mutation], subprocess.CompletedProcess[str]]:
    """validate.yml's run over a mutation's batch, made once per batch (on this xdist worker)."""
    runs: dict[int, subprocess.CompletedProcess[str]] = {}

    def run(mutation: Mutation) -> subprocess.CompletedProcess[str]:
        index = BATCH_OF[mutation.ident]
        if index not in runs:
            batch = BATCHES[index]
            runs[index] = run_validate(mutated_copy(batch, tmp_path_factory.mktemp("batch")), *batch[0].extra)
        return runs[index]

    return run


def test_the_batches_keep_what_may_hide_a_mistake_alone():
    assert len(BATCHES) < len(MUTATIONS) / 2  # the point of batching: far fewer runs than mutations
    for batch in BATCHES:
        assert len(batch) == 1 or not any(runs_alone(m) for m in batch)
        assert len({m.inventory for m in batch}) == 1
        for i, first in enumerate(batch):
            for second in batch[i + 1 :]:
                assert first.file != second.file or not changed_keys(first) & changed_keys(second)


# the tests of a batch side by side, so that an xdist worker takes them together
@pytest.mark.parametrize(
    "mutation", [m for b in BATCHES for m in b], ids=[m.ident for b in BATCHES for m in b]
)
def test_each_mistake_is_one_clear_line(mutation, validated):
    proc = validated(mutation)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "Traceback" not in out
    lines = problem_lines(proc.stdout)
    named = [line for line in lines if f": {mutation.variable}: " in line]
    assert named, f"no line names {mutation.variable}:\n" + "\n".join(lines) + out[-2000:]
    assert any(f"Fix: {mutation.fix}" in line for line in named), "\n".join(named)
    if mutation.source:
        labels = [line.split(f": {mutation.variable}: ", 1)[0] for line in named]
        assert any(label.endswith(mutation.source) for label in labels), labels
    assert not [line for line in lines for v in mutation.not_named if f": {v}: " in line], lines
    hosts = recap(proc.stdout)
    assert [line.split()[0] for line in hosts] == ["localhost"], hosts
    assert all(" changed=0 " in line for line in hosts), hosts


def cache_gpu_facts(cache: Path, pairs: dict[str, str]) -> dict[str, str]:
    """A private fact cache where each example GPU group has the nvidia_gpu facts of a captured GPU profile
    (nvidia_gpu_facts on this machine against the nvidia-smi stand-in, as tests/lab/plan-example does)."""
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache),
    )
    for group, profile in pairs.items():
        proc = subprocess.run(
            [
                "ansible",
                "-i",
                "inventories/example",
                group,
                "-o",
                "-m",
                "vllm_fleet.vllm_fleet.nvidia_gpu_facts",
                "-a",
                f"path={ROOT / 'tests' / 'lab' / 'nvidia-smi'}",
                "-e",
                "ansible_connection=local",
                "-e",
                "ansible_become=false",
                "-e",
                f"ansible_python_interpreter={sys.executable}",
            ],
            cwd=ROOT,
            env={**env, "NVIDIA_SMI_STANDIN_DIR": str(ROOT / "tests" / "data" / "nvidia-smi" / profile)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return env


@pytest.mark.parametrize(
    ("rtx4090_profile", "ok"),
    [("rtx4090x8", True), ("l4x1", False)],
)
def test_the_plans_that_need_no_host_are_made_by_validate(tmp_path, rtx4090_profile, ok):
    env = cache_gpu_facts(
        tmp_path / "facts",
        {
            "h100_nodes": "h100x8",
            "rtx4090_nodes": rtx4090_profile,
            "a100_nodes": "a100x8",
            "llama405b_nodes": "h100x8",  # the serving group: two 8xH100 hosts, one replica
        },
    )
    proc = subprocess.run(
        ["ansible-playbook", "-i", "inventories/example", "playbooks/validate.yml", "-v"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:]
        # 7 on single hosts, and the serving group's one replica over two hosts
        assert "8 (GPU group, model) plan(s) made from cached GPU facts" in " ".join(proc.stdout.split())
    else:
        # one L4 (24 GB) cannot hold a 70B model in FP8: fleet_plan_models[2]
        assert proc.returncode != 0
        [line] = [line for line in problem_lines(proc.stdout) if ": fleet_plan_models[2]: " in line]
        assert "llama-3.1-70b-instruct-fp8 on rtx4090_nodes" in line and "INFEASIBLE" in line
        assert (
            line.count("Fix: ") == 1
            and "Fix: use a node with >= 4 such GPUs (tensor_parallel_size 4)" in line
        )
    assert [line.split()[0] for line in recap(proc.stdout)] == ["localhost"]


def test_an_error_row_fails_plan_after_the_table_and_validate_names_it(tmp_path):
    """max_num_seqs: sixteen: plan.yml printed an ERROR row and exited 0; validate passed it."""
    folder = tmp_path / EXAMPLE
    shutil.copytree(ROOT / "inventories" / EXAMPLE, folder)
    path = folder / "group_vars" / "all" / "fleet_plan.yml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["fleet_plan_models"] = [{**data["fleet_plan_models"][0], "options": {"max_num_seqs": "sixteen"}}]
    path.write_text("---\n" + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    env = cache_gpu_facts(tmp_path / "facts", {"rtx4090_nodes": "rtx4090x8"})
    plan = subprocess.run(
        ["ansible-playbook", "-i", str(folder), "playbooks/plan.yml", "-e", "fleet_plan_facts_source=cache"]
        + ["-e", f"fleet_plan_report_dir={tmp_path / 'reports'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert plan.returncode != 0, plan.stdout[-3000:]
    row = plan.stdout.index("ERROR rtx4090_nodes/llama-3.1-8b-instruct: max_num_seqs: expected an integer")
    assert row < plan.stdout.index("1 (GPU group, model) pair(s) without a plan (ERROR rows)")
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(folder), "playbooks/validate.yml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode != 0
    [line] = problem_lines(proc.stdout)
    assert line.startswith(
        f"{path}: fleet_plan_models[0]: llama-3.1-8b-instruct on rtx4090_nodes cannot be planned"
    )
    assert line.endswith("Fix: set max_num_seqs to an integer")


def test_an_undefined_yaml_alias_names_its_file(tmp_path):
    """Ansible reads group_vars/all before any task and said only "YAML parsing failed", naming no file."""
    folder = tmp_path / LAB
    shutil.copytree(ROOT / "inventories" / LAB, folder)
    with (folder / LAB_KEY).open("a", encoding="utf-8") as handle:
        handle.write("lab_extra_key: *lab_key\n")
    line = len((folder / LAB_KEY).read_text(encoding="utf-8").splitlines())
    proc = run_validate(folder)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0
    assert (
        f"{folder / LAB_KEY}: YAML parsing failed at line {line}, column 16: "
        "found undefined alias 'lab_key'. Fix: define the anchor (&name) above the alias in the same file"
        in out
    ), out[-2000:]
