"""Helpers of the sleeping-models scenario's tests: addresses, keys, HTTP from the test runner and from inside
the node (the vLLMs listen on the node's loopback only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import docker
import pytest
from tools import ansible_run

GATEWAY = "vf-sleep-gateway"
GPU = "vf-sleep-gpu1"
NET = "vf-sleep-internal"
HTTP_PORT = 8080
CONTROLLER_PORT = 9190  # vllm_server_sleep_controller_port's default
MODELS = {"tiny-a": 8000, "tiny-b": 8001}  # served name -> public port; its vLLM on 127.0.0.1 at port + 10000
CONTROLLER = f"{GPU}-vllm-sleepd"


def container_of(name: str) -> str:
    return f"{GPU}-vllm-{name}"


@pytest.fixture(scope="session")
def engine() -> docker.DockerClient:
    return docker.from_env()


def ip_on(engine: docker.DockerClient, container: str) -> str:
    return engine.api.inspect_container(container)["NetworkSettings"]["Networks"][NET]["IPAddress"]


@pytest.fixture(scope="session")
def keys() -> dict[str, str]:
    gateway_vars = ansible_run.inventory_vars("gateways", ansible_run.molecule_inventory())
    return {
        "alice": gateway_vars["gateway_client_keys"][0]["key"],
        "backend": gateway_vars["vf_serve_backend_key"],
    }


def call(
    url: str, key: str, body: dict | None = None, method: str | None = None, timeout: float = 120
) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        method=method or ("POST" if data else "GET"),
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def on_node(engine: docker.DockerClient, url: str) -> Any:
    """GET ``url`` from inside the GPU node (its loopback is the vLLMs'), as JSON."""
    code = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).read().decode())"
    result = engine.containers.get(GPU).exec_run(["python3", "-c", code])
    assert result.exit_code == 0, result.output.decode()
    return json.loads(result.output)
