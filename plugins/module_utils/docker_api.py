"""A minimal Docker Engine API client over the unix socket (stdlib only, for modules on the hosts)."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from typing import Any


class DockerError(RuntimeError):
    """The Docker API answered with an error or could not be reached."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class DockerClient:
    """Just what the serving layer needs: inspect, logs, restart."""

    def __init__(self, socket_path: str = "/var/run/docker.sock", timeout: float = 60.0) -> None:
        self.socket_path = socket_path.removeprefix("unix://")
        self.timeout = timeout

    def request(
        self, method: str, path: str, timeout: float | None = None, body: dict[str, Any] | None = None
    ) -> tuple[int, bytes]:
        conn = _UnixConnection(self.socket_path, self.timeout if timeout is None else timeout)
        headers = {"Host": "docker"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except OSError as exc:
            raise DockerError(f"cannot reach the Docker API at {self.socket_path}: {exc}") from exc
        finally:
            conn.close()

    def inspect(self, name: str) -> dict[str, Any] | None:
        status, body = self.request("GET", f"/containers/{urllib.parse.quote(name)}/json")
        if status == 404:
            return None
        if status != 200:
            raise DockerError(f"inspect {name}: HTTP {status} {body[:200]!r}")
        return json.loads(body)

    def exec_output(self, name: str, cmd: list[str], timeout: float = 30) -> bytes:
        """What ``cmd`` prints inside the running container ``name`` (stdout and stderr, as with a tty)."""
        status, body = self.request(
            "POST",
            f"/containers/{urllib.parse.quote(name)}/exec",
            timeout,
            {"Cmd": cmd, "AttachStdout": True, "AttachStderr": True, "Tty": True},
        )
        if status != 201:
            raise DockerError(f"exec in {name}: HTTP {status} {body[:200]!r}")
        exec_id = json.loads(body)["Id"]
        status, body = self.request("POST", f"/exec/{exec_id}/start", timeout, {"Detach": False, "Tty": True})
        if status != 200:
            raise DockerError(f"exec in {name}: HTTP {status} {body[:200]!r}")
        return body

    def logs(self, name: str, tail: int = 5000) -> bytes:
        query = urllib.parse.urlencode({"stdout": 1, "stderr": 1, "tail": tail})
        status, body = self.request("GET", f"/containers/{urllib.parse.quote(name)}/logs?{query}")
        if status != 200:
            raise DockerError(f"logs {name}: HTTP {status} {body[:200]!r}")
        return body
