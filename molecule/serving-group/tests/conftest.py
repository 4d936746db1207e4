"""Helpers of the serving-group scenario's tests: names, addresses, keys, HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import docker
import pytest

GATEWAY = "vf-group-gateway"
NODES = ("vf-group-gpu1", "vf-group-gpu2")  # rank 0, rank 1 (the inventory order of group pair)
MEMBERS = ("vf-group-gpu1-vllm-tiny", "vf-group-gpu2-vllm-tiny")  # each node's vLLM container
NET = "vf-group-internal"
HTTP_PORT = 8080
VLLM_PORT = 8000
RENDEZVOUS_PORT = 29501


@pytest.fixture(scope="session")
def engine() -> docker.DockerClient:
    return docker.from_env()


def ip_on(engine: docker.DockerClient, container: str) -> str:
    return engine.api.inspect_container(container)["NetworkSettings"]["Networks"][NET]["IPAddress"]


def inventory_vars(group: str) -> dict[str, Any]:
    path = os.environ.get("MOLECULE_INVENTORY_FILE") or str(
        Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory"
    )
    out = subprocess.run(
        ["ansible-inventory", "-i", path, "--list"], check=True, capture_output=True, text=True
    )
    data = json.loads(out.stdout)
    return data["_meta"]["hostvars"][data[group]["hosts"][0]]


@pytest.fixture(scope="session")
def keys() -> dict[str, str]:
    gateway_vars = inventory_vars("gateways")
    return {
        "alice": gateway_vars["gateway_client_keys"][0]["key"],
        "backend": gateway_vars["vf_serve_backend_key"],
    }


def call(url: str, key: str, body: dict | None = None, timeout: float = 60) -> tuple[int, bytes]:
    """(HTTP status, body); status 0 for no answer (refused, reset, timed out)."""
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
    except OSError as exc:
        return 0, str(exc).encode()
