"""One CPU vLLM per simulated MIG instance, deployed by the real roles, asked directly and via the gateway."""

from __future__ import annotations

import json
import re

import pytest
from conftest import GATEWAY, GPU, HTTP_PORT, INSTANCES, call, container_of, ip_on, run_playbook

testinfra_hosts = ["ansible://gpu_nodes"]


def _fact(host) -> dict:
    return json.loads(host.file("/etc/ansible/facts.d/vllm_fleet.fact").content_string)


def _specs(tmp_path, *extra: str) -> dict[str, dict]:
    out = tmp_path / "specs.json"
    result = run_playbook("molecule/serving-mig/specs.yml", "-e", f"vf_mig_specs_file={out}", *extra)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return {s["key"]: s for s in json.loads(out.read_text())}


def test_one_container_per_instance_with_its_port_and_device(host, engine):
    for key, inst in INSTANCES.items():
        attrs = engine.api.inspect_container(container_of(key))
        config = attrs["Config"]
        assert attrs["State"]["Running"], key
        env = dict(item.split("=", 1) for item in config["Env"])
        # the lab sends no device request: the instance is named the way the NVIDIA runtime reads it
        assert env["NVIDIA_VISIBLE_DEVICES"] == inst["uuid"]
        assert config["Cmd"][config["Cmd"].index("--port") + 1] == str(inst["port"])
        assert config["Cmd"][config["Cmd"].index("--served-model-name") + 1] == "tiny"
        assert config["Cmd"][config["Cmd"].index("--tensor-parallel-size") + 1] == "1"
        assert config["Labels"]["io.vllm-fleet.model"] == "tiny"


def test_the_fact_records_each_instance(host):
    models = _fact(host)["models"]
    assert sorted(models) == sorted(INSTANCES)
    for key, inst in INSTANCES.items():
        current = models[key]["current"]
        assert (current["name"], current["key"], int(current["port"])) == ("tiny", key, inst["port"])
        assert current["mig"]["profile"] == "1g.18gb" and current["mig"]["uuid"] == inst["uuid"]
        assert current["plan"]["tensor_parallel_size"] == 1


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        ("nvidia", lambda i: [{"driver": "nvidia", "device_ids": [i["uuid"]], "capabilities": [["gpu"]]}]),
        ("cdi", lambda i: [{"driver": "cdi", "device_ids": [f"nvidia.com/gpu=0:{i['device']}"]}]),
    ],
)
def test_device_requests_name_each_instance(host, tmp_path, driver, expected):
    specs = _specs(
        tmp_path, "-e", "vllm_server_gpu_requests=true", "-e", f"vllm_server_gpu_request_driver={driver}"
    )
    assert sorted(specs) == sorted(INSTANCES)
    for key, inst in INSTANCES.items():
        assert specs[key]["device_requests"] == expected(inst)
        assert "NVIDIA_VISIBLE_DEVICES" not in specs[key]["env"]
        assert specs[key]["container"] == container_of(key)


def test_each_instance_answers_a_completion(host, engine, keys):
    address = ip_on(engine, GPU)
    for inst in INSTANCES.values():
        status, body = call(
            f"http://{address}:{inst['port']}/v1/completions",
            keys["backend"],
            {"model": "tiny", "prompt": "Hello", "max_tokens": 4},
        )
        assert status == 200, body
        assert json.loads(body)["choices"][0]["text"] is not None


def test_the_gateway_routes_the_model_over_both_instances(host, engine, keys):
    url = f"http://{ip_on(engine, GATEWAY)}:{HTTP_PORT}/v1/completions"
    for _ in range(4):
        status, body = call(url, keys["alice"], {"model": "tiny", "prompt": "Hello", "max_tokens": 2})
        assert status == 200, body
    address = ip_on(engine, GPU)
    log = engine.containers.get(GATEWAY).exec_run(["cat", "/var/log/nginx/access.log"]).output.decode()
    used = set(re.findall(r"upstream=(\S+)", log))
    assert {f"{address}:{i['port']}" for i in INSTANCES.values()} <= used, log[-2000:]
