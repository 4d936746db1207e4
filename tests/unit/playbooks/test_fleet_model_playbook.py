"""One model of the fleet: setting only vllm_server_listen_address moves every role that reaches vLLM.

Runs ansible-playbook (tests/fleet/model.yml) with -c local over stand-in hosts: the gateway role's
preflight and upstreams template, the monitoring role's targets, the fleet_bench role's target and
the fleet_rollout role's server names, each reading the hosts' gathered facts as in production.
gpu1 sets only vllm_server_listen_address (nothing deployed yet); gpu2 has an internal address and
a deployment record (its local fact) at another address and port: what runs wins.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from tools import ansible_run

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = ROOT / "tests" / "fleet" / "model.yml"

pytestmark = pytest.mark.skipif(
    shutil.which("ansible-playbook") is None
    and not (Path(sys.executable).parent / "ansible-playbook").exists(),
    reason="ansible-playbook is not installed",
)

LISTEN = "10.9.9.9"  # gpu1: only vllm_server_listen_address is set
RECORDED = ("10.2.2.2", 8001)  # gpu2: what vllm_server recorded (its internal address is 10.0.0.2)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("fleet-model")
    facts = {name: out / "facts" / name for name in ("gpu1", "gpu2")}
    for path in facts.values():
        path.mkdir(parents=True)
    record = {
        "name": "tiny",
        "listen_address": RECORDED[0],
        "port": RECORDED[1],
        "url": f"http://{RECORDED[0]}:{RECORDED[1]}",
        "image": "vllm/vllm-openai:v0.99.0",
        "vllm_version": "0.99.0",
    }
    (facts["gpu2"] / "vllm_fleet.fact").write_text(
        json.dumps({"models": {"tiny": {"current": record, "previous": None}}})
    )
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    model = {"name": "tiny", "path": "/srv/models/lab/tiny/main", "port": 8000}
    inventory = {
        "all": {
            "vars": {**local, "vllm_fleet_api_key": "fleet-model-backend-0123456789"},
            "children": {
                "gpu_nodes": {
                    "hosts": {
                        "gpu1": {
                            "fleet_model_fact_path": str(facts["gpu1"]),
                            "vllm_server_listen_address": LISTEN,
                            "vllm_server_models": [model],
                        },
                        "gpu2": {
                            "fleet_model_fact_path": str(facts["gpu2"]),
                            "vllm_fleet_internal_address": "10.0.0.2",
                            "vllm_server_models": [model],
                        },
                    }
                },
                "gateways": {
                    "hosts": {
                        "gw": {
                            "vllm_fleet_internal_address": "10.5.5.5",
                            "gateway_http_port": 8080,
                            "gateway_client_keys": [
                                {"name": "alice", "key": "fleet-model-client-0123456789"}
                            ],
                        }
                    }
                },
                "monitoring": {"hosts": {"mon": {}}},
            },
        }
    }
    inventory_file = out / "inventory.json"
    inventory_file.write_text(json.dumps(inventory))
    # the venv's ansible-playbook, whichever interpreter runs the tests
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = ansible_run.run_playbook(
        PLAYBOOK, inventory_file, "-e", f"fleet_model_out={out}", timeout=600, PATH=path
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    return json.loads((out / "found.json").read_text())


def test_gateway_upstreams_use_the_listen_address_and_the_record(found):
    # each host once as a server and once as its never-failed backup
    conf = found["upstreams"]
    servers = re.findall(r"^\s*server (\S+) max_fails=\d+ fail_timeout.*# host=(\S+)$", conf, re.M)
    backups = re.findall(r"^\s*server (\S+) max_fails=0 backup;\s*# host=(\S+)$", conf, re.M)
    assert sorted(backups) == sorted(servers)
    assert sorted(servers, key=lambda s: s[1]) == [
        (f"{LISTEN}:8000", "gpu1"),
        (f"{RECORDED[0]}:{RECORDED[1]}", "gpu2"),
    ]


def test_prometheus_targets_use_the_listen_address_and_the_record(found):
    by_host = {t["labels"]["host"]: t for t in found["targets"]}
    assert by_host["gpu1"]["targets"] == [f"{LISTEN}:8000"]
    assert by_host["gpu2"]["targets"] == [f"{RECORDED[0]}:{RECORDED[1]}"]
    # the version label is what was recorded as deployed; nothing is deployed on gpu1 yet
    assert by_host["gpu2"]["labels"]["version"] == "v0.99.0"
    assert by_host["gpu1"]["labels"]["version"] == "unknown"


def test_bench_targets_use_the_listen_address_and_the_record(found):
    assert found["bench_host"] == {
        "gpu1": f"http://{LISTEN}:8000",
        "gpu2": f"http://{RECORDED[0]}:{RECORDED[1]}",
    }
    # through the gateway: the gateway host's internal address and port
    assert set(found["bench_gateway"].values()) == {"http://10.5.5.5:8080"}


def test_rollout_names_the_servers_as_the_gateway_routes_them(found):
    assert found["rollout"] == {"gpu1": [f"{LISTEN}:8000"], "gpu2": [f"{RECORDED[0]}:{RECORDED[1]}"]}
