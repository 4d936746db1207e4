"""The vLLM watchdog shipped by the vllm_server role: decisions, restarts, metrics, a real HTTP probe."""

from __future__ import annotations

import http.server
import importlib.util
import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import docker_api

ROOT = Path(__file__).resolve().parents[5]
SCRIPT = ROOT / "roles" / "vllm_server" / "files" / "vllm_fleet_watchdog.py"
# on the hosts the role installs module_utils/docker_api.py beside the script under this name
sys.modules["vllm_fleet_docker_api"] = docker_api
_spec = importlib.util.spec_from_file_location("vllm_fleet_watchdog", SCRIPT)
assert _spec and _spec.loader
wd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wd)

NOW = 1_800_000_000.0
OLD_START = "2020-01-01T00:00:00.123456789Z"
RUNNING = {"State": {"Running": True, "Paused": False, "StartedAt": OLD_START}}
PAUSED = {"State": {"Running": True, "Paused": True, "StartedAt": OLD_START}}
EXITED = {"State": {"Running": False, "Paused": False, "StartedAt": OLD_START}}
OK = (True, "ok", 0.1)
FAIL = (False, "timeout", 5.0)


def _decide(prev: dict, info: Any, result: Any, maintenance: bool = False, grace: float = 300) -> tuple:
    return wd.decide(
        prev, now=NOW, info=info, maintenance=maintenance, result=result, threshold=3, grace=grace
    )


@pytest.mark.parametrize(
    ("prev", "info", "result", "maintenance", "outcome", "failures", "restart"),
    [
        ({}, RUNNING, OK, False, "ok", 0, False),
        ({"consecutive_failures": 2}, RUNNING, OK, False, "ok", 0, False),
        ({}, RUNNING, FAIL, False, "fail", 1, False),
        ({"consecutive_failures": 1}, RUNNING, FAIL, False, "fail", 2, False),
        ({"consecutive_failures": 2}, RUNNING, FAIL, False, "fail", 3, True),
        ({"consecutive_failures": 2}, PAUSED, FAIL, False, "paused", 3, True),
        ({"consecutive_failures": 2}, RUNNING, FAIL, True, "maintenance", 0, False),
        ({"consecutive_failures": 2}, None, None, False, "missing", 0, False),
        ({"consecutive_failures": 2}, EXITED, None, False, "not_running", 0, False),
    ],
)
def test_decide(
    prev: dict, info: Any, result: Any, maintenance: bool, outcome: str, failures: int, restart: bool
) -> None:
    state, got_outcome, got_restart = _decide(prev, info, result, maintenance)
    assert (got_outcome, state["consecutive_failures"], got_restart) == (outcome, failures, restart)
    assert state["last_check"] == NOW
    if outcome == "ok":
        assert state["last_success"] == NOW


def test_failures_inside_the_startup_grace_are_not_counted() -> None:
    just_started = {"State": {"Running": True, "Paused": False, "StartedAt": "2027-01-15T08:00:00Z"}}
    started = wd.parse_docker_time("2027-01-15T08:00:00Z")
    state, outcome, restart = wd.decide(
        {"consecutive_failures": 2},
        now=started + 10,
        info=just_started,
        maintenance=False,
        result=FAIL,
        threshold=3,
        grace=60,
    )
    assert (outcome, state["consecutive_failures"], restart) == ("starting", 0, False)
    state, outcome, restart = wd.decide(
        {"consecutive_failures": 2},
        now=started + 61,
        info=just_started,
        maintenance=False,
        result=FAIL,
        threshold=3,
        grace=60,
    )
    assert (outcome, restart) == ("fail", True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-12-02T14:17:36.855320754Z", 1796221056.855320),
        ("2026-12-02T14:17:36Z", 1796221056.0),
        ("0001-01-01T00:00:00Z", None),
        ("", None),
        ("garbage", None),
    ],
)
def test_parse_docker_time(value: str, expected: float | None) -> None:
    got = wd.parse_docker_time(value)
    assert got == (pytest.approx(expected) if expected is not None else None)


class FakeDocker:
    def __init__(self, info: dict | None, fail_restart: bool = False) -> None:
        self.info = info
        self.restarts: list[str] = []
        self.fail_restart = fail_restart

    def inspect(self, name: str) -> dict | None:
        return self.info

    def restart(self, name: str, stop_timeout: int) -> None:
        if self.fail_restart:
            raise RuntimeError("HTTP 500")
        self.restarts.append(name)


TARGET = {"model": "tiny", "container": "vllm-tiny", "url": "http://127.0.0.1:1", "api_key": "k"}


def _run(states: dict, docker: FakeDocker, result: tuple, log: list) -> dict:
    return wd.run_once(
        {"targets": [TARGET]},
        states,
        docker=docker,
        check=lambda t, timeout: result,
        now=lambda: NOW,
        log=log.append,
        maintenance=lambda c: False,
    )


def test_three_failed_checks_restart_once_and_reset() -> None:
    docker = FakeDocker(RUNNING)
    log: list[str] = []
    states: dict = {}
    for _ in range(3):
        states = _run(states, docker, FAIL, log)
    assert docker.restarts == ["vllm-tiny"]
    assert states["vllm-tiny"]["restarts_total"] == 1
    assert states["vllm-tiny"]["consecutive_failures"] == 0
    assert any("action=restart" in line for line in log)
    assert all("k" not in line.split("container=")[0].replace("tiny", "") for line in log)  # key never logged
    states = _run(states, docker, FAIL, log)
    assert docker.restarts == ["vllm-tiny"]  # the count starts again


def test_a_healthy_container_is_left_alone() -> None:
    docker = FakeDocker(RUNNING)
    log: list[str] = []
    states: dict = {}
    for _ in range(10):
        states = _run(states, docker, OK, log)
    assert docker.restarts == []
    assert states["vllm-tiny"]["restarts_total"] == 0
    assert len(log) == 10 and all("outcome=ok" in line for line in log)


def test_a_refused_restart_is_counted_and_retried() -> None:
    docker = FakeDocker(RUNNING, fail_restart=True)
    log: list[str] = []
    states: dict = {"vllm-tiny": {"consecutive_failures": 2}}
    states = _run(states, docker, FAIL, log)
    assert states["vllm-tiny"]["restart_failures_total"] == 1
    assert states["vllm-tiny"]["consecutive_failures"] == 3
    assert any("action=restart_failed" in line for line in log)


def test_stopped_container_is_not_probed() -> None:
    calls: list = []
    wd.run_once(
        {"targets": [TARGET]},
        {},
        docker=FakeDocker(EXITED),
        check=lambda t, s: calls.append(t) or OK,
        now=lambda: NOW,
        log=lambda line: None,
        maintenance=lambda c: False,
    )
    assert calls == []


def test_render_metrics() -> None:
    states = {
        "vllm-tiny": {
            "outcome": "ok",
            "last_check": NOW,
            "last_success": NOW,
            "duration": 0.123,
            "consecutive_failures": 0,
            "restarts_total": 2,
            "restart_failures_total": 0,
        }
    }
    text = wd.render_metrics(states, [TARGET])
    labels = 'model="tiny",container="vllm-tiny"'
    assert f"vllm_watchdog_up{{{labels}}} 1\n" in text
    assert f"vllm_watchdog_restarts_total{{{labels}}} 2\n" in text
    assert f"vllm_watchdog_last_success_timestamp_seconds{{{labels}}} 1800000000.000\n" in text
    assert "# TYPE vllm_watchdog_restarts_total counter" in text
    assert f'vllm_watchdog_outcome{{{labels},outcome="ok"}} 1' in text
    for line in text.splitlines():
        if not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])  # every sample value parses


def test_render_metrics_timestamps_keep_second_precision() -> None:
    states = {"vllm-tiny": {"outcome": "fail", "last_check": 1796221056.5, "last_success": 1796221000.0}}
    text = wd.render_metrics(states, [TARGET])
    value = next(
        line for line in text.splitlines() if line.startswith("vllm_watchdog_last_check_timestamp_seconds{")
    ).rsplit(" ", 1)[1]
    assert abs(float(value) - 1796221056.5) < 1.0
    assert 'vllm_watchdog_up{model="tiny",container="vllm-tiny"} 0' in text


class _Handler(http.server.BaseHTTPRequestHandler):
    delay = 0.0
    seen: list = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append((self.path, self.headers.get("Authorization"), body))
        time.sleep(_Handler.delay)
        payload = json.dumps({"choices": [{"text": "x"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.seen = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_probe_sends_a_real_completion(server: str) -> None:
    _Handler.delay = 0.0
    ok, reason, _ = wd.probe({**TARGET, "url": server}, timeout=2)
    assert (ok, reason) == (True, "ok")
    path, auth, body = _Handler.seen[0]
    assert path == "/v1/completions" and auth == "Bearer k"
    assert body["model"] == "tiny" and body["max_tokens"] == 1


def test_probe_of_a_pooling_model_asks_what_it_does(server: str) -> None:
    _Handler.delay = 0.0
    # the stand-in answers every path with "choices": a pooling answer must carry its own key
    ok, reason, _ = wd.probe({**TARGET, "url": server, "task": "embed"}, timeout=2)
    assert (ok, reason) == (False, "answer has no data")
    ok, reason, _ = wd.probe({**TARGET, "url": server, "task": "score"}, timeout=2)
    assert (ok, reason) == (False, "answer has no results")
    assert [(path, body) for path, _auth, body in _Handler.seen] == [
        ("/v1/embeddings", {"input": "ping", "model": "tiny"}),
        ("/rerank", {"query": "ping", "documents": ["ping"], "model": "tiny"}),
    ]


def test_probe_times_out(server: str) -> None:
    _Handler.delay = 1.5
    ok, reason, seconds = wd.probe({**TARGET, "url": server}, timeout=0.5)
    assert not ok and reason == "timeout" and seconds < 1.4


def test_probe_refused() -> None:
    ok, reason, _ = wd.probe({**TARGET, "url": "http://127.0.0.1:9"}, timeout=1)
    assert not ok and "refused" in reason.lower()


def test_main_writes_state_and_metrics(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _Handler.delay = 0.0
    config = {
        "targets": [{**TARGET, "url": server}],
        "state_file": str(tmp_path / "state.json"),
        "textfile": str(tmp_path / "textfile" / "vllm_watchdog.prom"),
        "maintenance_dir": str(tmp_path / "maintenance"),
    }
    (tmp_path / "wd.json").write_text(json.dumps(config))
    monkeypatch.setattr(wd, "DockerClient", lambda socket_path: FakeDocker(RUNNING))
    assert wd.main(["--config", str(tmp_path / "wd.json")]) == 0
    assert json.loads((tmp_path / "state.json").read_text())["vllm-tiny"]["outcome"] == "ok"
    assert (
        'vllm_watchdog_up{model="tiny",container="vllm-tiny"} 1'
        in (tmp_path / "textfile" / "vllm_watchdog.prom").read_text()
    )
    # maintenance: the container is not probed and failures are not counted
    (tmp_path / "maintenance").mkdir()
    (tmp_path / "maintenance" / "vllm-tiny").touch()
    seen = len(_Handler.seen)
    assert wd.main(["--config", str(tmp_path / "wd.json")]) == 0
    assert len(_Handler.seen) == seen
    assert json.loads((tmp_path / "state.json").read_text())["vllm-tiny"]["outcome"] == "maintenance"


class _FakeEngine(http.server.BaseHTTPRequestHandler):
    """A Docker Engine API stand-in on a unix socket: one paused container, vllm-tiny."""

    calls: list[str] = []
    paused = True

    def log_message(self, *args: Any) -> None:
        pass

    def address_string(self) -> str:  # unix sockets have no (host, port)
        return "docker"

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        _FakeEngine.calls.append("GET " + self.path)
        if self.path == "/containers/vllm-tiny/json":
            state = {"Running": True, "Paused": _FakeEngine.paused, "StartedAt": OLD_START}
            self._answer(200, json.dumps({"State": state}).encode())
        else:
            self._answer(404, b'{"message": "no such container"}')

    def do_POST(self) -> None:
        _FakeEngine.calls.append("POST " + self.path)
        if self.path == "/containers/vllm-tiny/unpause":
            _FakeEngine.paused = False
        self._answer(204)


class _UnixHTTPServer(http.server.HTTPServer):
    address_family = socket.AF_UNIX

    def server_bind(self) -> None:
        self.socket.bind(self.server_address)
        self.server_name, self.server_port = "docker", 0


def test_the_docker_client_unpauses_then_restarts_over_the_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "docker.sock")
    engine = _UnixHTTPServer(path, _FakeEngine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    _FakeEngine.calls, _FakeEngine.paused = [], True
    try:
        client = wd.DockerClient("unix://" + path)
        assert client.inspect("missing") is None
        client.restart("vllm-tiny", 7)
    finally:
        engine.shutdown()
        engine.server_close()
    assert _FakeEngine.calls == [
        "GET /containers/missing/json",
        "GET /containers/vllm-tiny/json",
        "POST /containers/vllm-tiny/unpause",
        "POST /containers/vllm-tiny/restart?t=7",
    ]


def test_the_docker_client_names_an_unreachable_socket(tmp_path: Path) -> None:
    client = wd.DockerClient(str(tmp_path / "none.sock"))
    with pytest.raises(docker_api.DockerError, match=r"cannot reach the Docker API at .*none\.sock"):
        client.inspect("vllm-tiny")


# --- LoRA adapters loaded at runtime: loaded again after a restart, once per container start ---------------
ADAPTERS = [{"name": "tiny-a", "path": "/r/a/1", "rank": 8}, {"name": "tiny-b", "path": "/r/b/1", "rank": 16}]


class _LoraVllm(http.server.BaseHTTPRequestHandler):
    """vLLM's /v1/models and /v1/load_lora_adapter as 0.32 answers them (404 for a missing folder)."""

    loaded: dict = {}
    seen: list = []

    def _reply(self, status: int, payload: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802
        _LoraVllm.seen.append(("GET", self.path, self.headers.get("Authorization")))
        cards = [{"id": "tiny", "parent": None, "root": "/m"}] + [
            {"id": n, "parent": "tiny", "root": p} for n, p in _LoraVllm.loaded.items()
        ]
        self._reply(200, json.dumps({"object": "list", "data": cards}).encode())

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _LoraVllm.seen.append(("POST", self.path, body))
        if body["lora_path"].startswith("/missing"):
            self._reply(404, json.dumps({"error": {"message": "not found", "code": 404}}).encode())
            return
        _LoraVllm.loaded[body["lora_name"]] = body["lora_path"]
        self._reply(
            200, f"Success: LoRA adapter '{body['lora_name']}' added successfully.".encode(), "text/plain"
        )

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def lora_vllm():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LoraVllm)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _LoraVllm.loaded, _LoraVllm.seen = {"tiny-a": "/r/a/1"}, []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_missing_adapters_are_those_not_listed_under_the_model() -> None:
    served = {
        "data": [{"id": "tiny"}, {"id": "tiny-a", "parent": "tiny"}, {"id": "tiny-b", "parent": "other"}]
    }
    assert wd.missing_adapters(served, "tiny", ADAPTERS) == [ADAPTERS[1]]
    assert wd.missing_adapters({"error": "x"}, "tiny", ADAPTERS) == ADAPTERS


def test_restore_loads_only_what_vllm_lacks_over_real_http(lora_vllm: str) -> None:
    target = {**TARGET, "url": lora_vllm, "adapters": [*ADAPTERS, {"name": "tiny-x", "path": "/missing/x"}]}
    assert wd.restore_adapters(target, timeout=2) == [("tiny-b", "loaded"), ("tiny-x", "HTTP 404")]
    assert _LoraVllm.loaded == {"tiny-a": "/r/a/1", "tiny-b": "/r/b/1"}
    assert _LoraVllm.seen[0] == ("GET", "/v1/models", "Bearer k")
    assert _LoraVllm.seen[1] == (
        "POST",
        "/v1/load_lora_adapter",
        {"lora_name": "tiny-b", "lora_path": "/r/b/1"},
    )


def test_adapters_are_loaded_again_once_per_container_start() -> None:
    docker = FakeDocker(RUNNING)
    calls: list = []
    answers = [[("tiny-a", "HTTP 500")], [("tiny-a", "loaded")], [("tiny-b", "loaded")]]
    log: list[str] = []

    def run(states: dict, result: tuple = OK) -> dict:
        return wd.run_once(
            {"targets": [{**TARGET, "adapters": ADAPTERS}]},
            states,
            docker=docker,
            check=lambda t, timeout: result,
            now=lambda: NOW,
            log=log.append,
            maintenance=lambda c: False,
            restore=lambda t, timeout: calls.append(t["container"]) or answers[len(calls) - 1],
        )

    states = run({})  # a refused load: tried again on the next pass
    states = run(states)
    assert calls == ["vllm-tiny", "vllm-tiny"]
    states = run(states)  # loaded for this start: left alone (an adapter unloaded on purpose stays unloaded)
    assert calls == ["vllm-tiny", "vllm-tiny"]
    docker.info = {"State": {**RUNNING["State"], "StartedAt": "2020-01-02T00:00:00Z"}}  # restarted
    states = run(states, FAIL)  # not serving: nothing to load into
    assert len(calls) == 2
    states = run(states)  # serving again after the restart: what it lost is loaded, once
    states = run(states)
    assert calls == ["vllm-tiny"] * 3
    assert any("action=load_adapter adapter=tiny-a result=HTTP 500" in line for line in log)
    assert any("action=load_adapter adapter=tiny-b result=loaded" in line for line in log)
    assert not any("Bearer" in line or "api_key" in line for line in log)


def test_a_target_without_adapters_never_lists_them() -> None:
    calls: list = []
    wd.run_once(
        {"targets": [TARGET]},
        {},
        docker=FakeDocker(RUNNING),
        check=lambda t, timeout: OK,
        now=lambda: NOW,
        log=lambda line: None,
        maintenance=lambda c: False,
        restore=lambda t, timeout: calls.append(t) or [],
    )
    assert calls == []


FOLLOWER = {"model": "tiny", "container": "gpu2-vllm-tiny", "check": "running", "group": "pair", "rank": 1}


def _run_follower(docker: FakeDocker, states: dict | None = None) -> tuple[dict, list[str], list]:
    log: list[str] = []
    asked: list = []
    states = wd.run_once(
        {"targets": [FOLLOWER]},
        states or {},
        docker=docker,
        check=lambda t, s: asked.append(t) or FAIL,  # a follower has no API: never asked
        now=lambda: NOW,
        log=log.append,
        maintenance=lambda c: False,
    )
    return states, log, asked


def test_a_running_follower_is_up_without_a_completion() -> None:
    states, log, asked = _run_follower(FakeDocker(RUNNING))
    assert asked == []
    assert states["gpu2-vllm-tiny"]["outcome"] == "ok"
    assert log[0].endswith("group=pair rank=1"), log


def test_a_dead_follower_is_named_down_and_left_to_its_group() -> None:
    docker = FakeDocker(EXITED)
    states, log, asked = _run_follower(docker)
    assert asked == [] and docker.restarts == []
    assert "container=gpu2-vllm-tiny outcome=not_running" in log[0] and "group=pair rank=1" in log[0]
    text = wd.render_metrics(states, [FOLLOWER])
    assert 'vllm_watchdog_up{model="tiny",container="gpu2-vllm-tiny"} 0\n' in text
    assert 'vllm_watchdog_outcome{model="tiny",container="gpu2-vllm-tiny",outcome="not_running"} 1' in text


def test_a_paused_follower_counts_as_failed() -> None:
    states, _log, _asked = _run_follower(FakeDocker(PAUSED))
    assert states["gpu2-vllm-tiny"]["outcome"] == "paused"
    assert states["gpu2-vllm-tiny"]["consecutive_failures"] == 1


def _watchdog_config(specs: list[dict], **extra: Any) -> dict:
    """The role's watchdog.json rendered for ``specs`` (Ansible's filters as plain functions)."""
    import jinja2

    path = ROOT / "roles" / "vllm_server" / "templates" / "etc" / "vllm-fleet" / "watchdog.json.j2"
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters.update(
        to_json=lambda v, **kw: json.dumps(v, **kw),
        comment=lambda v, **kw: f"# {v}",
        bool=lambda v: str(v).lower() in ("true", "1", "yes"),
    )
    values = {
        "ansible_managed": "managed",
        "vllm_server_watchdog_timeout": 5,
        "vllm_server_watchdog_failures": 3,
        "vllm_server_stop_timeout": 60,
        "vllm_server_docker_socket": "/var/run/docker.sock",
        "__vllm_server_state_dir": "/var/lib/vllm-fleet",
        "vllm_server_watchdog_textfile_dir": "/tmp",
        "__vllm_server_maintenance_dir": "/run/vllm-fleet/maintenance",
        "vllm_fleet_api_key": "k",
    }
    return json.loads(env.from_string(path.read_text()).render(**values, **extra, __vllm_server_specs=specs))


def test_the_watchdog_configuration_checks_a_follower_by_its_container() -> None:
    spec = {"name": "tiny", "ready_timeout": 600, "adapters": [], "lora_runtime": False}
    leader = {**spec, "container": "gpu1-vllm-tiny", "url": "http://10.0.0.1:8000", "role": "leader"}
    follower = {
        **spec,
        "container": "gpu2-vllm-tiny",
        "url": "",
        "role": "follower",
        "group": "pair",
        "rank": 1,
    }
    for specs in ([leader, follower], [follower], [leader]):
        by_container = {t["container"]: t for t in _watchdog_config(specs)["targets"]}
        assert sorted(by_container) == sorted(s["container"] for s in specs)
    config = _watchdog_config([leader, follower])
    first, second = config["targets"]
    assert first["url"] == "http://10.0.0.1:8000" and "check" not in first
    # the follower: checked by its container, no URL to ask and no key
    assert second == {
        "model": "tiny",
        "container": "gpu2-vllm-tiny",
        "check": "running",
        "group": "pair",
        "rank": 1,
        "startup_grace": 600,
    }


# --- models that may sleep: started one at a time (#28: no two vLLMs start into the same GPU memory) ---
NEVER = {"State": {"Running": False, "Paused": False, "StartedAt": "0001-01-01T00:00:00Z"}}


def _sleeper(name: str) -> dict:
    return {
        "model": name,
        "container": f"vllm-{name}",
        "check": "running",
        "api_key": "k",
        "sleep": {"url": f"http://127.0.0.1:1800{name[-1]}", "level": 1},
    }


SLEEPERS = [_sleeper("s1"), _sleeper("s2"), _sleeper("s3")]


class SleepHost:
    """Docker and the vLLMs behind the sleep controller of one host, as the watchdog sees them."""

    def __init__(self, states: dict[str, dict | None]) -> None:
        self.info = states
        self.healthy: set[str] = set()
        self.asleep: list[str] = []
        self.calls: list[str] = []

    def inspect(self, name: str) -> dict | None:
        return self.info.get(name)

    def start(self, name: str) -> None:
        self.calls.append(f"start {name}")
        self.info[name] = RUNNING  # starting: it answers /health once its vLLM is up

    def restart(self, name: str, stop_timeout: int) -> None:
        self.calls.append(f"restart {name}")

    def health(self, target: dict, timeout: float) -> bool:
        return target["container"] in self.healthy

    def sleep(self, target: dict, timeout: float) -> str:
        self.asleep.append(target["container"])
        return "HTTP 200"


def _pass(host: SleepHost, states: dict, maintenance: set[str] = frozenset()) -> dict:
    return wd.run_once(
        {"targets": SLEEPERS, "sleep_controller": "vllm-sleepd"},
        states,
        docker=host,
        check=lambda t, timeout: OK,
        now=lambda: NOW,
        log=lambda line: None,
        maintenance=lambda c: c in maintenance,
        sleep_health=host.health,
        sleep_put=host.sleep,
    )


def test_after_a_reboot_the_models_that_may_sleep_start_one_at_a_time_the_others_asleep() -> None:
    host = SleepHost({t["container"]: EXITED for t in SLEEPERS})  # Docker started none of them
    states: dict = {}
    states = _pass(host, states)
    assert host.calls == ["start vllm-s1"] and host.asleep == []
    states = _pass(host, states)  # s1 still loading: nothing else starts
    assert host.calls == ["start vllm-s1"]
    host.healthy.add("vllm-s1")
    states = _pass(host, states)
    assert host.calls[-1] == "start vllm-s2" and host.asleep == ["vllm-s1"]
    host.healthy.add("vllm-s2")
    states = _pass(host, states)
    assert host.calls[-1] == "start vllm-s3" and host.asleep == ["vllm-s1", "vllm-s1", "vllm-s2"]
    host.healthy.add("vllm-s3")
    states = _pass(host, states)  # all up: the controller reads them again, once
    assert host.calls[-1] == "restart vllm-sleepd"
    states = _pass(host, states)
    assert host.calls.count("restart vllm-sleepd") == 1 and len(host.calls) == 4
    assert states["_sleep"] == {"pending": False}


def test_a_never_started_or_maintained_sleeper_is_left_to_the_role_and_the_rollout() -> None:
    host = SleepHost({"vllm-s1": NEVER, "vllm-s2": EXITED, "vllm-s3": None})
    _pass(host, {}, maintenance={"vllm-s2"})
    assert host.calls == []  # s1: the role starts it; s2: a rollout holds it; s3: missing
    _pass(host, {})
    assert host.calls == ["start vllm-s2"]


def test_hosts_without_models_that_may_sleep_keep_their_state_as_before() -> None:
    states = _run({}, FakeDocker(RUNNING), OK, [])
    assert "_sleep" not in states


def test_the_docker_client_starts_a_container_over_the_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "docker.sock")
    engine = _UnixHTTPServer(path, _FakeEngine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    _FakeEngine.calls = []
    try:
        wd.DockerClient("unix://" + path).start("vllm-tiny")
    finally:
        engine.shutdown()
        engine.server_close()
    assert _FakeEngine.calls == ["POST /containers/vllm-tiny/start"]


def test_the_watchdog_configuration_gives_a_sleeper_its_loopback_vllm_and_the_controller() -> None:
    spec = {
        "name": "s1",
        "container": "vllm-s1",
        "ready_timeout": 600,
        "sleep_level": 2,
        "sleep_backend": {"host": "127.0.0.1", "port": 18000, "url": "http://127.0.0.1:18000"},
    }
    config = _watchdog_config([spec], __vllm_server_sleep={"container": {"name": "vllm-sleepd"}})
    assert config["sleep_controller"] == "vllm-sleepd"
    assert config["targets"][0]["sleep"] == {"url": "http://127.0.0.1:18000", "level": 2}
    assert _watchdog_config([])["sleep_controller"] == ""  # no model sleeps: no controller to restart


def test_no_sleeper_starts_while_docker_cannot_say_what_runs() -> None:
    host = SleepHost({t["container"]: EXITED for t in SLEEPERS})
    inspect = host.inspect

    def flaky(name: str) -> dict | None:
        if name == "vllm-s3":
            raise RuntimeError("HTTP 500")
        return inspect(name)

    host.inspect = flaky
    states = _pass(host, {})
    assert host.calls == [] and states["vllm-s3"]["outcome"] == "error"
