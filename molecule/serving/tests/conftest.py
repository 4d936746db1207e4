"""Shared helpers of the serving scenario's tests: addresses, keys, HTTP, Ansible runs."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import docker
import pytest
from tools import ansible_run

GATEWAY = "vf-serve-gateway"
GPU = "vf-serve-gpu1"
VLLM = "vf-serve-gpu1-vllm-tiny"
PUBLIC_NET = "vf-serve-public"
INTERNAL_NET = "vf-serve-internal"
HTTP_PORT = 8080
HTTPS_PORT = 8443
VLLM_PORT = 8000
ADAPTERS = ["tiny-lora-a", "tiny-lora-b"]  # the LoRA adapters of tiny in molecule.yml


@pytest.fixture(scope="session")
def engine() -> docker.DockerClient:
    return docker.from_env()


def ip_on(engine: docker.DockerClient, container: str, network: str) -> str:
    attrs = engine.api.inspect_container(container)
    return attrs["NetworkSettings"]["Networks"][network]["IPAddress"]


@pytest.fixture(scope="session")
def gateway_url(engine: docker.DockerClient) -> str:
    return f"http://{ip_on(engine, GATEWAY, PUBLIC_NET)}:{HTTP_PORT}"


@pytest.fixture(scope="session")
def vllm_url(engine: docker.DockerClient) -> str:
    return f"http://{ip_on(engine, GPU, INTERNAL_NET)}:{VLLM_PORT}"


def inventory_vars(group: str) -> dict[str, Any]:
    """Group variables of the scenario's inventory (literal values only)."""
    return ansible_run.inventory_vars(group, ansible_run.molecule_inventory())


@pytest.fixture(scope="session")
def keys() -> dict[str, str]:
    gateway_vars = inventory_vars("gateways")
    clients = {c["name"]: c["key"] for c in gateway_vars["gateway_client_keys"]}
    clients["backend"] = gateway_vars["vf_serve_backend_key"]
    return clients


def call(
    url: str, key: str | None = None, body: dict | None = None, method: str | None = None, timeout: float = 60
) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, headers=headers, method=method or ("POST" if data else "GET")
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def chat(
    url: str, key: str, max_tokens: int = 8, model: str = "tiny", **extra: Any
) -> tuple[int, dict, bytes]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Hello"}],
        "max_tokens": max_tokens,
        **extra,
    }
    return call(f"{url}/v1/chat/completions", key, body)


def served_adapters(vllm_url: str, key: str) -> dict[str, str]:
    """The LoRA adapters of tiny that vLLM itself lists: name -> path."""
    status, _, raw = call(f"{vllm_url}/v1/models", key)
    assert status == 200, raw
    return {m["id"]: m["root"] for m in json.loads(raw)["data"] if m.get("parent") == "tiny"}


def wait_until_serving(url: str, key: str, timeout: float = 240) -> float:
    """Seconds until a completion through ``url`` succeeds."""
    start = time.monotonic()
    while True:
        try:
            status, _, _ = call(
                f"{url}/v1/completions", key, {"model": "tiny", "prompt": "hi", "max_tokens": 1}, timeout=10
            )
            if status == 200:
                return time.monotonic() - start
        except OSError:
            pass
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{url} did not serve within {timeout} s")
        time.sleep(2)


def run_playbook(playbook: str, *extra: str) -> subprocess.CompletedProcess:
    return ansible_run.run_playbook(playbook, ansible_run.molecule_inventory(), *extra)


explain = ansible_run.explain
