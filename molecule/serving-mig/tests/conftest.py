"""Helpers of the MIG serving scenario's tests: addresses, keys, HTTP, Ansible runs."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from typing import Any

import docker
import pytest
from tools import ansible_run

GATEWAY = "vf-mig-gateway"
GPU = "vf-mig-gpu1"
NET = "vf-mig-internal"
HTTP_PORT = 8080
# the model's two 1g.18gb instances of the h200x1-mig capture: GPU instances 9 and 10, MIG devices 3 and 4
INSTANCES = {
    "tiny@gpu0-gi9": {"port": 8000, "device": 3, "uuid": "MIG-00000003-0000-0000-0000-000000000003"},
    "tiny@gpu0-gi10": {"port": 8001, "device": 4, "uuid": "MIG-00000004-0000-0000-0000-000000000004"},
}


def container_of(key: str) -> str:
    return f"{GPU}-vllm-{key.replace('@', '-')}"


@pytest.fixture(scope="session")
def engine() -> docker.DockerClient:
    return docker.from_env()


def ip_on(engine: docker.DockerClient, container: str) -> str:
    return engine.api.inspect_container(container)["NetworkSettings"]["Networks"][NET]["IPAddress"]


def inventory_vars(group: str) -> dict[str, Any]:
    return ansible_run.inventory_vars(group, ansible_run.molecule_inventory())


@pytest.fixture(scope="session")
def keys() -> dict[str, str]:
    gateway_vars = inventory_vars("gateways")
    return {
        "alice": gateway_vars["gateway_client_keys"][0]["key"],
        "backend": gateway_vars["vf_serve_backend_key"],
    }


def call(url: str, key: str, body: dict | None = None, timeout: float = 120) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        method="POST" if data else "GET",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def run_playbook(playbook: str, *extra: str) -> subprocess.CompletedProcess:
    return ansible_run.run_playbook(playbook, ansible_run.molecule_inventory(), *extra)
