"""The one stdlib Docker Engine API client: the host-side watchdog's (unix socket, no dependencies).

The vllm_server role installs this file next to the watchdog script as ``vllm_fleet_docker_api.py``;
the watchdog runs from a systemd timer with plain python3, outside Ansible, so it cannot use
community.docker. Modules and tasks talk to Docker through community.docker instead.
"""

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
    """Just what the watchdog needs: inspect, start, and restart (unpausing first)."""

    def __init__(self, socket_path: str = "/var/run/docker.sock", timeout: float = 60.0) -> None:
        self.socket_path = socket_path.removeprefix("unix://")
        self.timeout = timeout

    def request(self, method: str, path: str, timeout: float | None = None) -> tuple[int, bytes]:
        conn = _UnixConnection(self.socket_path, self.timeout if timeout is None else timeout)
        try:
            conn.request(method, path, headers={"Host": "docker"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        except OSError as exc:
            raise DockerError(f"cannot reach the Docker API at {self.socket_path}: {exc}") from exc
        finally:
            conn.close()

    def inspect(self, name: str) -> dict[str, Any] | None:
        status, body = self.request("GET", f"/containers/{urllib.parse.quote(name)}/json", 10)
        if status == 404:
            return None
        if status != 200:
            raise DockerError(f"inspect {name}: HTTP {status} {body[:200]!r}")
        return json.loads(body)

    def start(self, name: str) -> None:
        """Start a stopped container (one already running is left as it is)."""
        status, body = self.request("POST", f"/containers/{urllib.parse.quote(name)}/start", 60)
        if status not in (204, 304):
            raise DockerError(f"start {name}: HTTP {status} {body[:200]!r}")

    def restart(self, name: str, stop_timeout: int) -> None:
        """Restart a container; a paused one is unpaused first (Docker cannot stop a paused container)."""
        quoted = urllib.parse.quote(name)
        info = self.inspect(name) or {}
        if (info.get("State") or {}).get("Paused"):
            status, body = self.request("POST", f"/containers/{quoted}/unpause", 30)
            if status not in (204, 304):
                raise DockerError(f"unpause {name}: HTTP {status} {body[:200]!r}")
        status, body = self.request(
            "POST", f"/containers/{quoted}/restart?t={int(stop_timeout)}", stop_timeout + 60
        )
        if status != 204:
            raise DockerError(f"restart {name}: HTTP {status} {body[:200]!r}")
