"""Cache-affinity routing in a real nginx with njs: the gateway role's templates rendered by Ansible
(tests/gateway/render.yml) in front of three HTTP backends that answer with their own name.

A session key pins a conversation to one backend; draining or stopping it moves only its sessions;
when passive failure marking has taken out every server of the ring, the request still reaches the
live one through least connections; with nothing alive the client gets the gateway's 503.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
HOSTS = ("b1", "b2", "b3")
MODELS = ("tiny", "tiny-user", "tiny-prefix")
CLIENT_KEY = "affinity-client-key-0123456789"
NJS_MODULE = Path("/usr/lib/nginx/modules/ngx_http_js_module.so")
GATEWAY_DEFAULTS = yaml.safe_load((ROOT / "roles/gateway/defaults/main.yml").read_text())


@pytest.fixture(scope="module")
def nginx_bin() -> str:
    path = shutil.which("nginx")
    if path is None or not NJS_MODULE.exists():
        pytest.skip("nginx with njs not found: run bin/bootstrap (installs nginx and libnginx-mod-http-js)")
    return path


def _free_ports(count: int) -> list[int]:
    """Distinct free ports: every socket is held until all are bound (one at a time could repeat a port)."""
    held = [socket.socket() for _ in range(count)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


class Backend:
    """One serving host: an HTTP server per model port, answering {"backend": host}."""

    def __init__(self, host: str, ports: list[int]) -> None:
        self.host = host
        self.ports = dict(zip(MODELS, ports, strict=True))
        self.servers: list[ThreadingHTTPServer] = []

    def start(self) -> None:
        host = self.host

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps({"backend": host}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.serve(Handler)

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Answer on every model port with ``handler``, each in its own thread."""
        for port in self.ports.values():
            server = ThreadingHTTPServer(("127.0.0.1", port), handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
        self.servers = []


# What render.yml writes (its template task's destinations); each configuration is rendered once per test
# process and kept with its ports and folder as placeholders (an ansible-playbook run takes seconds; tests
# differ only in their free ports).
RENDERED_FILES = tuple(
    item["dest"]
    for task in yaml.safe_load((ROOT / "tests/gateway/render.yml").read_text())[0]["tasks"]
    if "ansible.builtin.template" in task
    for item in task["loop"]
)
_RENDERED: dict[str, dict[str, str]] = {}
_NUMBER = re.compile(r"(?<!\d)\d+(?!\d)")


class Gateway:
    def __init__(self, nginx: str, out: Path, backends: list[Backend], port: int) -> None:
        self.nginx, self.out, self.backends = nginx, out, backends
        self.port = port
        (out / "logs").mkdir(parents=True, exist_ok=True)
        (out / "nginx.conf").write_text(
            f"load_module {NJS_MODULE};\n"
            f"user root;\npid {out}/nginx.pid;\nerror_log {out}/logs/error.log warn;\n"
            "worker_processes 1;\n"
            # the role's own main-context line (configure.yml): how long a reload lets streams run on
            f"worker_shutdown_timeout {GATEWAY_DEFAULTS['gateway_worker_shutdown_timeout']};\n"
            "events { worker_connections 256; }\n"
            f"http {{\n    client_body_temp_path {out}/body;\n    proxy_temp_path {out}/proxy;\n"
            f"    include {out}/gateway.conf;\n}}\n"
        )

    def render(self, drained: list[str] = (), affinity: bool = True) -> None:  # type: ignore[assignment]
        """The role's templates for these backends (``drained`` marked down) into this gateway's folder:
        rendered by Ansible the first time this process meets the configuration, then from what it wrote."""
        ports = [p for b in self.backends for p in b.ports.values()] + [self.port]
        key = json.dumps([list(drained), affinity, [(b.host, list(b.ports)) for b in self.backends]])
        if key not in _RENDERED:
            self._render(drained, affinity)
            index = {str(port): f"@PORT{i}@" for i, port in enumerate(ports)}
            _RENDERED[key] = {
                name: _NUMBER.sub(
                    lambda m: index.get(m.group(), m.group()),
                    (self.out / name).read_text().replace(str(self.out), "@OUT@"),
                )
                for name in RENDERED_FILES
            }
            return
        for name, text in _RENDERED[key].items():
            for i, port in enumerate(ports):
                text = text.replace(f"@PORT{i}@", str(port))
            (self.out / name).write_text(text.replace("@OUT@", str(self.out)))

    def _render(self, drained: list[str], affinity: bool) -> None:
        extra = {
            "render_out": str(self.out),
            "render_drained": list(drained),
            "render_backends": [
                {
                    "host": b.host,
                    "address": "127.0.0.1",
                    "models": [{"name": m, "port": p} for m, p in b.ports.items()],
                }
                for b in self.backends
            ],
            "vllm_fleet_api_key": "affinity-backend-key-0123456789",
            "gateway_client_keys": [{"name": "tester", "key": CLIENT_KEY}],
            "gateway_rate_limit_tiers": {"default": {"rate": "1000r/s", "burst": 1000}},
            "gateway_listen_address": "127.0.0.1",
            "gateway_http_port": self.port,
            "gateway_access_log": str(self.out / "logs" / "access.log"),
            # failure marks last for the whole test: the fallback below depends on them
            "gateway_upstream_fail_timeout": "60s",
            "gateway_connect_timeout": "1s",
            "gateway_affinity": {"key": "header" if affinity else "none"},
            "gateway_affinity_models": {
                "tiny-user": {"key": "user"},
                "tiny-prefix": {"key": "prompt_prefix", "prompt_prefix_chars": 64},
            }
            if affinity
            else {},
        }
        playbook = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
        result = subprocess.run(
            [playbook, "-i", "localhost,", str(ROOT / "tests/gateway/render.yml"), "-e", json.dumps(extra)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    def _nginx(self, *args: str) -> None:
        result = subprocess.run(
            [self.nginx, "-p", str(self.out), "-c", str(self.out / "nginx.conf"), *args],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr

    def start(self) -> None:
        self._nginx("-t", "-q")
        self._nginx()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("nginx did not listen")

    def reload(self) -> None:
        """Graceful reload, then wait until the old worker has gone (new requests meet the new one)."""
        self._nginx("-t", "-q")
        before = self._workers()
        self._nginx("-s", "reload")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._workers() & before:
            time.sleep(0.1)

    def _workers(self) -> set[str]:
        master = (self.out / "nginx.pid").read_text().strip()
        found = subprocess.run(["pgrep", "-P", master], capture_output=True, text=True).stdout.split()
        return set(found)

    def stop(self) -> None:
        if (self.out / "nginx.pid").exists():
            self._nginx("-s", "stop")

    def drain_edit(self, host: str, state: str) -> None:
        """The role's in-place drain edit (drain_apply.yml's own regexp and replacement) on upstreams.conf."""
        tasks = yaml.safe_load((ROOT / "roles/gateway/tasks/drain_apply.yml").read_text())
        edit = next(t["ansible.builtin.replace"] for t in tasks if "ansible.builtin.replace" in t)
        pattern = edit["regexp"].replace("{{ gateway_drain_host | regex_escape }}", re.escape(host))
        replacement = r"\1 down;\2" if state == "drained" else r"\1;\2"
        path = self.out / "upstreams.conf"
        text, count = re.subn(pattern, replacement, path.read_text(), flags=re.M)
        assert count > 0, f"no server line of {host} in upstreams.conf"
        path.write_text(text)

    def ask(
        self, model: str = "tiny", session: str | None = None, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        payload = {"model": model, "messages": [{"role": "user", "content": "hi"}], **(body or {})}
        headers = {"Authorization": f"Bearer {CLIENT_KEY}", "Content-Type": "application/json"}
        if session is not None:
            headers["X-Session-Id"] = session
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(payload), headers)
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        finally:
            conn.close()

    def backend_of(self, **kwargs: Any) -> str:
        status, answer = self.ask(**kwargs)
        assert status == 200, answer
        return str(answer["backend"])


@pytest.fixture
def gateway(nginx_bin: str, tmp_path: Path) -> Iterator[Gateway]:
    ports = _free_ports(len(HOSTS) * len(MODELS) + 1)
    backends = [Backend(h, ports[i * len(MODELS) : (i + 1) * len(MODELS)]) for i, h in enumerate(HOSTS)]
    for backend in backends:
        backend.start()
    gw = Gateway(nginx_bin, tmp_path, backends, ports[-1])
    gw.render()
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()
        for backend in backends:
            backend.stop()


SESSIONS = [f"conversation-{i}" for i in range(24)]


def _pins(gw: Gateway, sessions: list[str] = SESSIONS, turns: int = 3) -> dict[str, str]:
    pins: dict[str, str] = {}
    for session in sessions:
        seen = {gw.backend_of(session=session) for _ in range(turns)}
        assert len(seen) == 1, f"{session} moved between {seen}"
        pins[session] = seen.pop()
    return pins


def test_a_session_stays_on_one_backend_and_sessions_spread(gateway: Gateway) -> None:
    pins = _pins(gateway)
    assert len(set(pins.values())) >= 2, pins
    # without a session key: least connections, which spreads one client's requests
    assert len({gateway.backend_of() for _ in range(9)}) >= 2


def test_user_field_and_prompt_prefix_keys(gateway: Gateway) -> None:
    for user in ("alice", "bob", "carol"):
        assert len({gateway.backend_of(model="tiny-user", body={"user": user}) for _ in range(4)}) == 1
    assert len({gateway.backend_of(model="tiny-user", body={"user": f"u{i}"}) for i in range(24)}) >= 2
    # each turn repeats the earlier ones: the first 64 characters of the messages stay the same
    system = {"role": "system", "content": "You are a terse assistant for conversation number 7."}
    turns = [[system, {"role": "user", "content": "first"}]]
    turns.append([*turns[0], {"role": "assistant", "content": "ok"}, {"role": "user", "content": "second"}])
    turns.append([*turns[1], {"role": "assistant", "content": "ok"}, {"role": "user", "content": "third"}])
    assert len({gateway.backend_of(model="tiny-prefix", body={"messages": t}) for t in turns}) == 1


def test_draining_the_pinned_backend_moves_only_its_sessions(gateway: Gateway) -> None:
    pins = _pins(gateway)
    victim = pins[SESSIONS[0]]
    gateway.drain_edit(victim, "drained")
    gateway.reload()
    moved = _pins(gateway)
    assert victim not in moved.values()
    assert {s: b for s, b in moved.items() if pins[s] != victim} == {
        s: b for s, b in pins.items() if b != victim
    }
    gateway.drain_edit(victim, "in_service")
    gateway.reload()
    assert _pins(gateway) == pins
    # the role's own rendering of a drained host (preflight's markers) pins the same way
    gateway.render(drained=[victim])
    gateway.reload()
    assert _pins(gateway) == moved


def test_a_stopped_backend_fails_no_request(gateway: Gateway) -> None:
    pins = _pins(gateway)
    victim_name = pins[SESSIONS[0]]
    victim = next(b for b in gateway.backends if b.host == victim_name)
    victim.stop()
    after = {s: gateway.backend_of(session=s) for s in SESSIONS for _ in range(2)}
    assert victim_name not in after.values()
    assert {s: b for s, b in after.items() if pins[s] != victim_name} == {
        s: b for s, b in pins.items() if b != victim_name
    }


def test_every_server_marked_failed_falls_back_to_the_live_one(gateway: Gateway) -> None:
    for backend in gateway.backends:
        backend.stop()
    # every server of both upstreams is marked failed (max_fails 2, fail_timeout 60 s)
    for session in SESSIONS[:8]:
        status, answer = gateway.ask(session=session)
        assert status == 503, answer
        assert answer["error"]["code"] == "backend_unavailable"
    survivor = gateway.backends[1]
    survivor.start()
    # the ring has no server left to try; least connections' never-failed backups reach the survivor
    for session in SESSIONS:
        assert gateway.backend_of(session=session) == survivor.host


def test_off_by_default_a_session_header_changes_nothing(gateway: Gateway) -> None:
    gateway.render(affinity=False)
    gateway.reload()
    assert "hash $vf_affinity_key" not in (gateway.out / "upstreams.conf").read_text()
    assert len({gateway.backend_of(session="conversation-0") for _ in range(9)}) >= 2


@pytest.mark.parametrize("affinity", [True, False], ids=["affinity", "least-connections"])
def test_two_backends_gone_at_once_fail_no_request(gateway: Gateway, affinity: bool) -> None:
    """With two of three hosts gone before nginx has marked either failed, a request may meet both
    dead servers first: it must still reach the third (a bounded number of tries would answer 502)."""
    if not affinity:
        gateway.render(affinity=False)
        gateway.reload()
    survivor = gateway.backends[2]
    for backend in gateway.backends[:2]:
        backend.stop()
    answers = [gateway.ask(session=s) for s in SESSIONS]
    assert [status for status, _ in answers] == [200] * len(SESSIONS), answers
    assert {answer["backend"] for _, answer in answers} == {survivor.host}


CHUNKS = 12


class _Streamer(BaseHTTPRequestHandler):
    """An OpenAI-style SSE stream: CHUNKS chunks 0.15 s apart, then [DONE]."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(CHUNKS):
            self._chunk(f'data: {{"choices": [{{"index": 0, "delta": {{"content": "t{i}"}}}}]}}\n\n')
            time.sleep(0.15)
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


def _stream(port: int, results: list[tuple[int, list[str]]]) -> None:
    payload = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {CLIENT_KEY}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(payload), headers)
        response = conn.getresponse()
        lines = [line.decode().strip() for line in response if line.strip()]
        results.append((response.status, lines))
    except (OSError, http.client.HTTPException) as exc:
        results.append((0, [repr(exc)]))
    finally:
        conn.close()


def test_a_gateway_reload_cuts_no_stream_in_flight(gateway: Gateway) -> None:
    """The role reloads nginx on every drain, undrain and configuration change, often while clients stream:
    streams in flight finish on the old worker, requests during the reload reach the new one."""
    for backend in gateway.backends:
        backend.stop()
        backend.serve(_Streamer)
    results: list[tuple[int, list[str]]] = []
    for drained in ([gateway.backends[0].host], []):
        gateway.render(drained=drained)  # rendering takes seconds: before the streams, reloaded during them
        clients = [threading.Thread(target=_stream, args=(gateway.port, results)) for _ in range(8)]
        for client in clients:
            client.start()
        time.sleep(0.5)  # every stream has its first chunks
        gateway.reload()
        for client in clients:
            client.join(30)
    assert len(results) == 16
    for status, lines in results:
        assert status == 200, lines
        assert len(lines) == CHUNKS + 1 and lines[-1] == "data: [DONE]", lines
