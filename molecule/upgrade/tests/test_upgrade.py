"""Rolling upgrades through the real gateway and vLLM: no client request fails or is cut."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
from tools import ansible_run

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "benchmarks"))

from upgrade_under_load import StreamLoad  # noqa: E402

GATEWAY = "vf-up-gateway"
NODES = ["vf-up-gpu1", "vf-up-gpu2"]
NETWORK = "vf-up-net"
IMAGE_B = "vf-up/vllm-cpu:b"
CLIENT_KEY = "vf-up-client-0123456789abcdef"


@pytest.fixture(scope="module")
def engine() -> docker.DockerClient:
    return docker.from_env()


@pytest.fixture(scope="module")
def gateway_url(engine: docker.DockerClient) -> str:
    attrs = engine.api.inspect_container(GATEWAY)
    return f"http://{attrs['NetworkSettings']['Networks'][NETWORK]['IPAddress']}:8080"


def run_playbook(playbook: str, *extra: str, timeout: float = 2400) -> subprocess.CompletedProcess:
    return ansible_run.run_playbook(playbook, ansible_run.molecule_inventory(), *extra, timeout=timeout)


def state(engine: docker.DockerClient) -> dict[str, dict]:
    out = {}
    for node in NODES:
        attrs = engine.api.inspect_container(f"{node}-vllm-tiny")
        fact_raw = (
            engine.containers.get(node).exec_run(["cat", "/etc/ansible/facts.d/vllm_fleet.fact"]).output
        )
        fact = json.loads(fact_raw)["models"]["tiny"]
        out[node] = {
            "image": attrs["Config"]["Image"],
            "started": attrs["State"]["StartedAt"],
            "current": fact["current"],
            "previous": fact["previous"],
        }
    return out


def under_load(
    gateway_url: str, playbook: str, *extra: str
) -> tuple[subprocess.CompletedProcess, object, float]:
    # four streaming clients, one second apart each: steady traffic that leaves the CPU to vLLM's starts
    load = StreamLoad(gateway_url, CLIENT_KEY, clients=4, max_tokens=64, max_seconds=2400, think=1.0).start()
    time.sleep(3)
    start = time.monotonic()
    result = run_playbook(playbook, *extra)
    seconds = time.monotonic() - start
    time.sleep(3)
    return result, load.stop(), seconds


def test_a_batch_of_every_replica_is_refused_before_anything_changes(engine):
    before = state(engine)
    result = run_playbook("playbooks/upgrade.yml", "-e", json.dumps({"fleet_rollout_serial": ["100%"]}))
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "takes 2 of the 2 hosts serving tiny out of service at once" in out, out[-3000:]
    assert "fleet_rollout_allow_downtime" in out
    assert state(engine) == before


def test_upgrade_under_load_drops_no_request(engine, gateway_url):
    before = state(engine)
    extra = {
        "vllm_server_image": IMAGE_B,
        "fleet_rollout_soak_seconds": 20,
        "fleet_rollout_soak_min_requests": 5,
    }
    result, stats, seconds = under_load(gateway_url, "playbooks/upgrade.yml", "-e", json.dumps(extra))
    print(f"upgrade of {len(NODES)} hosts in {seconds:.0f} s under load: {stats.summary()}")
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    assert stats.sent >= 20
    assert stats.failed == 0 and stats.truncated == 0, stats.errors
    after = state(engine)
    for node in NODES:
        assert after[node]["image"] == IMAGE_B
        assert after[node]["current"]["image"] == IMAGE_B
        assert after[node]["previous"]["version"] == before[node]["current"]["version"]
        assert after[node]["started"] != before[node]["started"]
    # canary first, one host per batch, each gated against the recorded baseline
    assert "Upgrade of vf-up-gpu1: up_h200 batch 1/2 (canary)" in result.stdout
    assert "vf-up-gpu1 tiny: completion_seconds" in result.stdout
    # the canary soaked in service and was judged on what the gateway and vLLM saw
    assert "Canary vf-up-gpu1 after 20 s in service: gateway" in result.stdout


def test_bad_canary_is_rolled_back_and_the_others_are_untouched(engine, gateway_url):
    before = state(engine)
    models = [
        {
            "name": "tiny",
            "path": "/srv/vf-up-models/lab/tiny/main",
            "revision": "main",
            "port": 8000,
            "overrides": {
                "max_model_len": 512,
                "dtype": "float32",
                "enforce_eager": True,
                "max_num_seqs": 16,
                "kv_cache_memory_bytes": "64M",
            },
            "extra_args": ["--no-such-flag"],
        }
    ]
    result, stats, seconds = under_load(
        gateway_url, "playbooks/upgrade.yml", "-e", json.dumps({"vllm_server_models": models})
    )
    out = result.stdout + result.stderr
    print(f"bad canary in {seconds:.0f} s under load: {stats.summary()}")
    assert result.returncode != 0
    assert 'Upgrade of vf-up-gpu1 (up_h200 batch 1/2) failed at "' in out
    assert "unrecognized arguments: --no-such-flag" in out
    assert "vf-up-gpu1 runs the version it ran before again" in out
    assert "stops here: 1 host(s) not reached (vf-up-gpu2)" in out
    assert stats.failed == 0 and stats.truncated == 0, stats.errors
    after = state(engine)
    assert after["vf-up-gpu1"]["current"]["version"] == before["vf-up-gpu1"]["current"]["version"]
    assert after["vf-up-gpu1"]["image"] == before["vf-up-gpu1"]["image"]
    assert after["vf-up-gpu2"] == before["vf-up-gpu2"]
    # the canary is back in service on the gateway
    drained = engine.containers.get(GATEWAY).exec_run(["ls", "/etc/nginx/vllm-fleet/drained"]).output.decode()
    assert "vf-up-gpu1" not in drained
