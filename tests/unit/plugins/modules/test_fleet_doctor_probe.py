"""The vllm_fleet_doctor_probe module's readers, on this machine (real sockets, folders, files)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
# the module imports the collection's module_utils (on the path through pyproject's pythonpath)
_spec = importlib.util.spec_from_file_location(
    "vllm_fleet_doctor_probe", ROOT / "plugins" / "modules" / "vllm_fleet_doctor_probe.py"
)
probe_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe_module)


def layout(tmp_path: Path, folders: list[str], ref: str | None = None) -> Path:
    base = tmp_path / "org" / "model"
    for folder in folders:
        (base / folder).mkdir(parents=True)
    if ref:
        (base / "refs").mkdir(parents=True, exist_ok=True)
        (base / "refs" / "main").write_text(ref + "\n")
    return base


@pytest.mark.parametrize(
    ("folders", "ref", "revision", "expected", "how"),
    [
        (["main"], None, "main", "main", "revision"),
        (["abc123", "old"], "abc123", "main", "abc123", "ref"),
        ([".staging-main"], None, "main", ".staging-main", "staging"),
        (["abc123"], None, "v2", "abc123", "newest revision folder"),
        ([], None, "main", "main", "missing"),
    ],
)
def test_resolve_dir(tmp_path, folders, ref, revision, expected, how):
    base = layout(tmp_path, folders, ref)
    assert probe_module.resolve_dir(str(base), revision) == (str(base / expected), how)


def test_model_dir_measures_weights_index_and_config(tmp_path):
    folder = layout(tmp_path, ["abc"]) / "abc"
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"x" * 1000)
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"x" * 500)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1400}}))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / ".cache").mkdir()
    (folder / ".cache" / "partial.incomplete").write_bytes(b"y" * 10_000)  # hidden: not counted
    info = probe_module.model_dir({"name": "m", "base": str(folder.parent), "revision": "abc"})
    assert info["exists"] and info["found_by"] == "revision"
    assert info["weights_bytes"] == 1500 and info["files"] == 4
    assert info["index_total_size"] == 1400 and info["config"] == {"model_type": "llama"}
    assert info["bytes_present"] == 1500 + len((folder / "model.safetensors.index.json").read_bytes()) + len(
        (folder / "config.json").read_bytes()
    )
    missing = probe_module.model_dir({"name": "x", "path": str(tmp_path / "nope")})
    assert missing["exists"] is False and missing["bytes_present"] == 0


def test_disk_of_a_missing_path_is_measured_at_its_parent(tmp_path):
    info = probe_module.disk(str(tmp_path / "not" / "yet"))
    assert info["measured_at"] == str(tmp_path) and info["exists"] is False
    assert info["free_bytes"] > 0 and info["total_bytes"] >= info["free_bytes"]


def test_listeners_name_the_process():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        found = probe_module.listeners([port, 1])
    finally:
        server.close()
    assert list(found) == [str(port)]
    (sock,) = found[str(port)]
    assert sock["address"] == "127.0.0.1"
    assert any(p["pid"] == os.getpid() for p in sock["processes"])


def test_docker_state_without_a_socket(tmp_path):
    sock = str(tmp_path / "docker.sock")
    docker = {"socket": sock, "error": f"no Docker API socket at {sock}", "host_info": None}
    info, containers, images, runtime = probe_module.docker_state(docker, "p")
    assert info == {"available": False, "socket": sock, "error": f"no Docker API socket at {sock}"}
    assert (containers, images, runtime) == ([], {}, {})


def test_docker_state_without_an_answer_names_the_socket():
    info, *_ = probe_module.docker_state({"socket": "/run/d.sock", "error": "", "host_info": None}, "p")
    assert info == {
        "available": False,
        "socket": "/run/d.sock",
        "error": "no answer from the Docker API at /run/d.sock",
    }


def test_docker_state_from_the_community_docker_results():
    vllm = {
        "Id": "0123456789abcdef",
        "Name": "/vllm-tiny",
        "Image": "sha256:aa",
        "Config": {
            "Image": "vllm/vllm-openai:v0.32.0",
            "Labels": {"p.role": "vllm_server"},
            "Entrypoint": ["vllm", "serve"],
            "Cmd": ["tiny", "--port=8001"],
        },
        "State": {"Running": True},
        "HostConfig": {"IpcMode": "host", "ShmSize": 67108864, "NetworkMode": "host"},
    }
    other = {"Id": "fedcba", "Name": "/nginx", "Config": {"Image": "nginx", "Cmd": ["nginx"]}, "State": {}}
    docker = {
        "socket": "/var/run/docker.sock",
        "error": "",
        "host_info": {
            "Runtimes": {"runc": {}, "nvidia": {}},
            "DefaultRuntime": "runc",
            "CDISpecDirs": ["/etc/cdi"],
        },
        "containers": [
            {"item": {"Id": "0123456789abcdef"}, "exists": True, "container": vllm},
            {"item": {"Id": "gone"}, "exists": False, "container": None},
            {"item": {"Id": "fedcba"}, "exists": True, "container": other},
        ],
        "images": [
            {"item": "vllm/vllm-openai:v0.32.0", "images": [{"Config": {"Env": ["CUDA_VERSION=12.8.1"]}}]},
            {"item": "vllm/vllm-openai:v0.33.0", "images": []},
            {"item": "skipped", "skipped": True},
        ],
    }
    info, containers, images, runtime = probe_module.docker_state(docker, "p")
    assert info == {"available": True, "socket": "/var/run/docker.sock", "error": None}
    assert [(c["name"], c["vllm"], c["port"], c["ipc_mode"]) for c in containers] == [
        ("vllm-tiny", True, 8001, "host"),
        ("nginx", False, None, ""),
    ]
    assert images == {
        "vllm/vllm-openai:v0.32.0": {"present": True, "cuda_version": "12.8"},
        "vllm/vllm-openai:v0.33.0": {"present": False, "cuda_version": None},
    }
    assert runtime == {"runtime": True, "default_runtime": "runc", "cdi_spec_dirs": ["/etc/cdi"]}


@pytest.mark.parametrize(
    ("exec_result", "size", "error"),
    [
        ({"item": "0123", "rc": 0, "stdout": "17179869184\n", "stderr": ""}, 17179869184, None),
        (
            {"item": "0123", "rc": 126, "stdout": "OCI runtime exec failed: python3 not found", "stderr": ""},
            None,
            "OCI",
        ),
        ({"item": "0123", "failed": True, "msg": "No such container"}, None, "No such container"),
        (None, None, "not measured"),
    ],
)
def test_docker_state_reads_the_shm_measured_inside_each_vllm_container(exec_result, size, error):
    vllm = {
        "Id": "0123",
        "Name": "/vllm-tiny",
        "Image": "sha256:aa",
        "Config": {"Image": "vllm/vllm-openai:v0.32.0", "Labels": {"p.role": "vllm_server"}, "Cmd": ["tiny"]},
        "State": {"Running": True},
        "HostConfig": {"IpcMode": "host", "ShmSize": 67108864, "NetworkMode": "host"},
    }
    docker = {
        "socket": "/var/run/docker.sock",
        "host_info": {},
        "containers": [{"item": {"Id": "0123"}, "exists": True, "container": vllm}],
        "shm": [exec_result] if exec_result else [],
    }
    _info, [found], _images, _runtime = probe_module.docker_state(docker, "p")
    assert (found["ipc_mode"], found["dev_shm_bytes"]) == ("host", size)
    assert (found["dev_shm_error"] is None) == (error is None)
    assert (found["dev_shm_error"] or "").startswith(error or "")
