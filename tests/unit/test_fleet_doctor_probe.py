"""The vllm_fleet_doctor_probe module's readers, on this machine (real sockets, folders, files)."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import socket
import socketserver
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    info, containers, images, runtime = probe_module.docker_state(str(tmp_path / "docker.sock"), ["img"], "p")
    assert info == {
        "available": False,
        "socket": str(tmp_path / "docker.sock"),
        "error": f"no Docker API socket at {tmp_path / 'docker.sock'}",
    }
    assert (containers, images, runtime) == ([], {}, {})


class _FakeDocker(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _docker_handler(shm_output: bytes):
    inspect = {
        "Id": "c0ffee000000aa",
        "Name": "/vllm-tiny",
        "Config": {"Image": "vllm/vllm-openai:v0.32.0", "Labels": {"io.vllm-fleet.role": "vllm_server"}},
        "Image": "sha256:1",
        "State": {"Running": True},
        "HostConfig": {"IpcMode": "host", "ShmSize": 67108864, "NetworkMode": "host"},
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def address_string(self):
            return "docker"

        def log_message(self, *args):
            pass

        def _send(self, status, body):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/containers/json":
                self._send(200, [{"Id": inspect["Id"]}])
            elif self.path == f"/containers/{inspect['Id']}/json":
                self._send(200, inspect)
            elif self.path == "/info":
                self._send(200, {})
            else:
                self._send(404, {"message": "no such thing"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == f"/containers/{inspect['Id']}/exec":
                assert body["Cmd"][0] == "python3" and "/dev/shm" in body["Cmd"][-1]
                self._send(201, {"Id": "exec1"})
            elif self.path == "/exec/exec1/start":
                assert body == {"Detach": False, "Tty": True}
                self._send(200, shm_output)
            else:
                self._send(404, {"message": "no such exec"})

    return Handler


@pytest.mark.parametrize(
    ("output", "size", "error"),
    [
        (b"17179869184\r\n", 17179869184, None),
        (b"OCI runtime exec failed: python3 not found\r\n", None, "OCI runtime"),
    ],
)
def test_docker_state_measures_the_shm_inside_each_vllm_container(tmp_path, output, size, error):
    path = str(tmp_path / "docker.sock")
    server = _FakeDocker(path, _docker_handler(output))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        info, containers, _images, _runtime = probe_module.docker_state(path, [], "io.vllm-fleet")
    finally:
        server.shutdown()
        server.server_close()
    assert info["available"], info
    [found] = containers
    assert (found["ipc_mode"], found["dev_shm_bytes"]) == ("host", size)
    assert (found["dev_shm_error"] or "").startswith(error or "")
    assert (found["dev_shm_error"] is None) == (error is None)
