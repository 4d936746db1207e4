"""What is planned is what is deployed (#29): the same models planned three ways are planned the same.

One inventory of stand-in GPU hosts on this machine (ansible_connection=local, every host an L4 from the
captured l4x1 profile through the nvidia-smi stand-in), with the models of the issue: Qwen3-8B plain, with
8 rank-64 LoRA adapters, with its own image and release, and in a two-host serving group. Its model and
adapter folders are real files in the model_weights layout. Planned

- by ``vllm_server``'s own preflight (``ansible-playbook``, the role's tasks as a deployment runs them, up
  to the plans: nothing is started),
- by ``playbooks/plan.yml`` (GPU facts read live), and
- by the doctor's planning (``doctor.plan_for`` over the record the doctor's probe makes of each host:
  ``targets`` and the probe module's own reading of the folders),

each model's planner options and plan are equal.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.vllm_fleet.vllm_fleet.plugins.modules import vllm_fleet_doctor_probe as probe
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor, planning
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import groups
from tools.ansible_run import explain, run_playbook
from tools.once_per_run import once_per_run

ROOT = Path(__file__).resolve().parents[5]
FEATURES = ROOT / "tests" / "data" / "model-features" / "Qwen__Qwen3-8B"
KEY = "sk-three-ways-0123456789abcdef0123456789"
VERSION = "0.32.0"
ADAPTERS = [{"name": f"task-{i}", "repo": f"acme/task-{i}", "revision": f"{i:040x}"} for i in range(8)]
RANK64 = {"peft_type": "LORA", "r": 64, "lora_alpha": 128, "target_modules": ["q_proj", "v_proj"]}


def _model(root: Path, name: str) -> str:
    """A Qwen3-8B revision folder of its own in the model_weights layout."""
    folder = root / "Qwen" / name / ("a" * 40)
    folder.mkdir(parents=True)
    for part in ("config.json", "chat_template.jinja"):
        (folder / part).write_text((FEATURES / part).read_text())
    return str(folder)


def _served(root: Path) -> dict[str, list[dict[str, Any]]]:
    for adapter in ADAPTERS:
        folder = root / adapter["repo"] / adapter["revision"]
        folder.mkdir(parents=True)
        (folder / "adapter_config.json").write_text(json.dumps(RANK64))
    return {
        "h1": [{"name": "qwen-plain", "path": _model(root, "plain"), "port": 8000}],
        "h2": [{"name": "qwen-lora", "path": _model(root, "lora"), "port": 8000, "adapters": ADAPTERS}],
        "h3": [
            {
                "name": "qwen-own",
                "path": _model(root, "own"),
                "port": 8000,
                "image": "vllm/vllm-openai:v0.30.0",
            }
        ],
        "g1": [{"name": "qwen-group", "path": _model(root, "group"), "port": 8000}],
        "g2": [{"name": "qwen-group", "path": _model(root, "group2"), "port": 8000}],
    }


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict[str, Any]:
    # the two playbook runs, once for all pytest-xdist workers
    return once_per_run(
        tmp_path_factory, "serving-unit-three-ways", lambda: _plan_three_ways(tmp_path_factory)
    )


def _plan_three_ways(tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("three-ways")
    models, out = tmp / "models", tmp / "out"
    out.mkdir()
    served = _served(models)
    # g2 serves the group's model from the same folder as g1 (one replica): the folder is g1's
    served["g2"][0]["path"] = served["g1"][0]["path"]
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").symlink_to(ROOT / "tests" / "lab" / "nvidia-smi")
    docker_socket = socket.socket(socket.AF_UNIX)  # preflight only checks that the socket exists
    docker_socket.bind(str(tmp / "docker.sock"))
    common = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become": False,
        "vllm_fleet_api_key": KEY,
        "vllm_fleet_internal_address": "127.0.0.1",
        "vllm_fleet_models_root": str(models),
        "vllm_fleet_docker_socket": str(tmp / "docker.sock"),
        "vllm_fleet_vllm_version": VERSION,
        "vllm_fleet_vllm_image": f"vllm/vllm-openai:v{VERSION}",
        "vllm_fleet_serving_groups": [{"group": "pair", "backend": "auto", "interface": "lo"}],
    }
    inventory = {
        "all": {
            "vars": common,
            "children": {
                "gpu_nodes": {
                    "children": {
                        "l4": {"hosts": {h: {"vllm_server_models": served[h]} for h in ("h1", "h2", "h3")}},
                        "pair": {"hosts": {h: {"vllm_server_models": served[h]} for h in ("g1", "g2")}},
                    }
                }
            },
        }
    }
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "preflight.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "vllm_server's preflight, up to the plans",
                    # as the collection's playbooks do: its filters loaded once (vllm_fleet_preload)
                    "hosts": "{{ 'gpu_nodes' | vllm_fleet.vllm_fleet.vllm_fleet_preload }}",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Plan as a deployment does",
                            "ansible.builtin.include_role": {
                                "name": "vllm_fleet.vllm_fleet.vllm_server",
                                "tasks_from": "preflight",
                            },
                        },
                        {
                            "name": "Keep the plans and the GPU facts",
                            "ansible.builtin.copy": {
                                "content": "{{ {'plans': __vllm_server_plans, 'specs': __vllm_server_specs,"
                                " 'gpu': ansible_facts.nvidia_gpu} | to_json }}",
                                "dest": f"{out}/{{{{ inventory_hostname }}}}.json",
                                "mode": "0600",
                            },
                        },
                    ],
                }
            ]
        )
    )
    env = {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "NVIDIA_SMI_STANDIN_DIR": str(ROOT / "tests" / "data" / "nvidia-smi" / "l4x1"),
    }
    deployed = run_playbook(tmp / "preflight.yml", tmp / "hosts.yml", **env)
    assert deployed.returncode == 0, explain(deployed)
    report = run_playbook(
        "playbooks/plan.yml",
        tmp / "hosts.yml",
        "-e",
        "fleet_plan_facts_source=live",
        "-e",
        f"fleet_plan_json_path={out}/plan.json",
        **env,
    )
    assert report.returncode == 0, explain(report)
    docker_socket.close()
    return {
        "inventory": inventory,
        "served": served,
        "hosts": {h: json.loads((out / f"{h}.json").read_text()) for h in served},
        "plan_yml": json.loads((out / "plan.json").read_text()),
    }


def _doctor_plan(planned: dict[str, Any], host: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The doctor's options and plan of a model, from the record its probe makes of the host."""
    common = planned["inventory"]["all"]["vars"]
    hvars = {**common, "vllm_server_models": planned["served"][host]}
    members = {"pair": ["g1", "g2"], "gpu_nodes": list(planned["served"])}
    record = doctor.targets(
        {
            "host": host,
            "gpu_node": True,
            "storage_root": common["vllm_fleet_models_root"],
            "adapters_root": common["vllm_fleet_models_root"],
            "served": planned["served"][host],
            "image": common["vllm_fleet_vllm_image"],
            "vllm_version": VERSION,
            "plan_options": {},
        }
    )
    group = groups.group_of_host({**hvars, "groups": {"all": [], **members}}, host)
    record.update(
        gpu=planned["hosts"][host]["gpu"],
        serving_group=group,
        probe={"model_dirs": {d["name"]: probe.model_dir(d) for d in record["probe_args"]["model_dirs"]}},
    )
    model = next(m for m in record["served"] if m["name"] == name)
    plan, source = doctor.plan_for(record, model, planning.doctor_planner)
    assert source == "planned now", plan
    return doctor.planner_options(record, model), dict(plan)


CASES = [("h1", "qwen-plain"), ("h2", "qwen-lora"), ("h3", "qwen-own"), ("g1", "qwen-group")]


@pytest.mark.parametrize(("host", "name"), CASES, ids=[n for _h, n in CASES])
def test_vllm_server_plan_yml_and_the_doctor_plan_the_same(planned, host, name):
    served = planned["hosts"][host]["plans"][name]
    entry = next(e for e in planned["plan_yml"]["entries"] if e["model"] == name)
    options, by_doctor = _doctor_plan(planned, host, name)
    assert entry["plan"] == served, f"plan.yml plans {name} differently from vllm_server"
    assert by_doctor == served, f"the doctor plans {name} differently from vllm_server"
    assert entry["inputs"]["options"] == options


def test_the_cases_are_the_ones_that_used_to_differ(planned):
    plans = {name: planned["hosts"][host]["plans"][name] for host, name in CASES}
    plain, lora, own, group = (plans[n] for n in ("qwen-plain", "qwen-lora", "qwen-own", "qwen-group"))
    # 8 rank-64 adapters cost an L4 KV cache: the length and the batch shrink (plan.yml used to miss it)
    assert lora["kv_cache_tokens"] < plain["kv_cache_tokens"]
    assert (lora["max_model_len"], lora["max_num_seqs"]) < (plain["max_model_len"], plain["max_num_seqs"])
    args = lora["vllm_args"]
    assert args[args.index("--max-loras") + 1] == "8" and args[args.index("--max-lora-rank") + 1] == "64"
    # the model's own image is planned for the release its tag names, not the group's
    assert (own["vllm_version"], plain["vllm_version"]) == ("0.30.0", VERSION)
    # the serving group is one replica over both hosts, a pipeline stage each
    assert group["pipeline_parallel_size"] == 2
    spec = next(s for s in planned["hosts"]["h3"]["specs"] if s["name"] == "qwen-own")
    assert spec["vllm_version"] == "0.30.0" and spec["image"] == "vllm/vllm-openai:v0.30.0"
