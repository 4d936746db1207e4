"""Two models with sleep on one simulated GPU, deployed by the real roles behind the host's sleep controller
(#28): the gateway reaches them at their usual ports, alternating requests with the official openai client
are all answered, each switch a wake the controller counts, and vLLM's metrics stay at the model's port."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import openai
from conftest import (
    CONTROLLER,
    CONTROLLER_PORT,
    GATEWAY,
    GPU,
    HTTP_PORT,
    MODELS,
    call,
    container_of,
    ip_on,
    on_node,
)
from tools import ansible_run

testinfra_hosts = ["ansible://gpu_nodes"]


def _metric(text: str, name: str, model: str) -> float:
    found = re.search(rf'^{name}{{[^}}]*model="{re.escape(model)}"[^}}]*}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_vllms_on_loopback_behind_the_controller(host, engine):
    for name, port in MODELS.items():
        attrs = engine.api.inspect_container(container_of(name))
        cmd, env = attrs["Config"]["Cmd"], dict(e.split("=", 1) for e in attrs["Config"]["Env"])
        assert attrs["State"]["Running"], name
        listen = (cmd[cmd.index("--host") + 1], cmd[cmd.index("--port") + 1])
        assert listen == ("127.0.0.1", str(port + 10000))
        # the lab switch leaves --enable-sleep-mode out (the CPU build refuses it); dev mode has the sleep API
        assert "--enable-sleep-mode" not in cmd and env["VLLM_SERVER_DEV_MODE"] == "1"
    controller = engine.api.inspect_container(CONTROLLER)
    assert controller["State"]["Running"]
    assert controller["Config"]["Entrypoint"] == ["python3"]
    assert controller["Config"]["Labels"]["io.vllm-fleet.role"] == "vllm_server_sleepd"
    assert all(m["Mode"] == "ro" for m in controller["Mounts"])
    config = json.loads(host.file("/srv/vf-serve-models/sleepd/sleepd.json").content_string)
    assert [(m["name"], m["port"], m["backend"]) for m in config["models"]] == [
        (name, port, f"http://127.0.0.1:{port + 10000}") for name, port in MODELS.items()
    ]
    # room awake for one: each planned as if alone on the GPU
    sizes = [m["bytes"] for m in config["models"]]
    assert max(sizes) <= config["budget_bytes"] < sum(sizes)


def test_the_record_keeps_the_public_address(host, engine):
    fact = json.loads(host.file("/etc/ansible/facts.d/vllm_fleet.fact").content_string)["models"]
    address = ip_on(engine, GPU)
    for name, port in MODELS.items():
        current = fact[name]["current"]
        assert current["url"] == f"http://{address}:{port}"
        assert current["sleep_backend"]["url"] == f"http://127.0.0.1:{port + 10000}"


def test_alternating_requests_through_the_gateway_each_wake_once(host, engine, keys):
    api = openai.OpenAI(base_url=f"http://{ip_on(engine, GATEWAY)}:{HTTP_PORT}/v1", api_key=keys["alice"],
                        max_retries=0, timeout=300)  # fmt: skip
    metrics_url = f"http://{ip_on(engine, GPU)}:{CONTROLLER_PORT}/metrics"
    names = list(MODELS)
    took = []
    for i in range(6):
        model, other = names[i % 2], names[(i + 1) % 2]
        before = call(metrics_url, keys["backend"])[1].decode()
        t0 = time.monotonic()
        done = api.completions.create(model=model, prompt="hello there", max_tokens=4, temperature=0)
        took.append(time.monotonic() - t0)
        after = call(metrics_url, keys["backend"])[1].decode()
        assert done.usage.completion_tokens >= 1
        wakes = _metric(after, "vllm_fleet_sleep_wakes_total", model) - _metric(
            before, "vllm_fleet_sleep_wakes_total", model
        )
        asleep = {n: on_node(engine, f"http://127.0.0.1:{p + 10000}/is_sleeping")["is_sleeping"]
                  for n, p in MODELS.items()}  # fmt: skip
        if i:  # the first may find its model awake already (the last one readiness woke)
            assert wakes == 1, (i, model, after)
        assert asleep == {model: False, other: True}, (i, asleep)
    text = call(metrics_url, keys["backend"])[1].decode()
    wake = {
        n: _metric(text, "vllm_fleet_sleep_wake_seconds_sum", n)
        / max(_metric(text, "vllm_fleet_sleep_wake_seconds_count", n), 1)
        for n in names
    }
    # the figures, for the record of the run (pytest keeps stdout only on failure)
    summary = {"client_seconds_after_switch": took, "controller_wake_seconds_mean": wake}
    (Path("/tmp") / "vf-sleep-verify.json").write_text(json.dumps(summary, indent=1))


def test_the_models_port_answers_like_its_vllm(host, engine, keys):
    address = ip_on(engine, GPU)
    for port in MODELS.values():
        status, body = call(f"http://{address}:{port}/metrics", keys["backend"])
        assert status == 200 and b"vllm:num_requests_running" in body  # vLLM's, not the controller's
        assert call(f"http://{address}:{port}/health", keys["backend"])[0] == 200
        # vLLM's sleep API is never reachable at the model's address
        assert call(f"http://{address}:{port}/sleep?level=1", keys["backend"], method="POST")[0] == 404
        assert call(f"http://{address}:{port}/wake_up", keys["backend"], method="POST")[0] == 404


def test_the_watchdog_checks_them_without_waking_them(host, engine, keys):
    """A completion every pass would wake each model in turn: the watchdog checks their containers run."""
    config = json.loads(host.file("/etc/vllm-fleet/watchdog.json").content_string)
    assert {t["model"]: t.get("check") for t in config["targets"]} == {name: "running" for name in MODELS}
    metrics_url = f"http://{ip_on(engine, GPU)}:{CONTROLLER_PORT}/metrics"
    before = call(metrics_url, keys["backend"])[1].decode()
    host.check_output("systemctl start vllm-fleet-watchdog.service")
    prom = host.file("/var/lib/prometheus/node-exporter/vllm_watchdog.prom").content_string
    for name in MODELS:
        assert re.search(rf'^vllm_watchdog_up{{model="{name}",[^}}]*}} 1$', prom, re.M), prom
    after = call(metrics_url, keys["backend"])[1].decode()
    for name in MODELS:
        assert _metric(after, "vllm_fleet_sleep_wakes_total", name) == _metric(
            before, "vllm_fleet_sleep_wakes_total", name
        )


def test_a_rollback_restarts_a_model_behind_the_controller(host, engine, keys):
    """tasks_from rollback recreates tiny-a as recorded: it starts once tiny-b sleeps, the controller restarts
    to read both again, and both answer through the gateway after."""
    before = engine.api.inspect_container(container_of("tiny-a"))["Id"]
    controller_started = engine.api.inspect_container(CONTROLLER)["State"]["StartedAt"]
    extra = '{"vllm_server_rollback_models": ["tiny-a"], "vllm_server_rollback_restart_models": ["tiny-a"]}'
    inventory = ansible_run.molecule_inventory()
    result = ansible_run.run_playbook("molecule/serving/rollback.yml", inventory, "-e", extra)
    assert result.returncode == 0, ansible_run.explain(result)
    assert engine.api.inspect_container(container_of("tiny-a"))["Id"] != before
    assert engine.api.inspect_container(CONTROLLER)["State"]["StartedAt"] != controller_started
    api = openai.OpenAI(base_url=f"http://{ip_on(engine, GATEWAY)}:{HTTP_PORT}/v1", api_key=keys["alice"],
                        max_retries=0, timeout=300)  # fmt: skip
    for model in [*MODELS, *MODELS]:
        assert api.completions.create(model=model, prompt="hi", max_tokens=2).usage.completion_tokens >= 1


def test_after_a_reboot_the_watchdog_starts_them_one_at_a_time(host, engine, keys):
    """Docker does not restart a model that may sleep (no restart policy: after a reboot it would start them
    all at once, each vLLM asking for the GPU memory its plan gives it). With both stopped, as after a reboot,
    the watchdog starts one per pass once the other answers and sleeps, then restarts the controller."""
    for name in MODELS:
        attrs = engine.api.inspect_container(container_of(name))
        assert attrs["HostConfig"]["RestartPolicy"]["Name"] == "no", name
        engine.containers.get(container_of(name)).stop(timeout=30)
    controller_started = engine.api.inspect_container(CONTROLLER)["State"]["StartedAt"]

    def healthy(port: int) -> bool:
        url = f"http://127.0.0.1:{port + 10000}/health"
        code = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=5)"
        return engine.containers.get(GPU).exec_run(["python3", "-c", code]).exit_code == 0

    seen = []
    deadline = time.monotonic() + 1500
    while time.monotonic() < deadline:
        host.check_output("systemctl start vllm-fleet-watchdog.service")
        running = {n: engine.api.inspect_container(container_of(n))["State"]["Running"] for n in MODELS}
        up = {n: running[n] and healthy(p) for n, p in MODELS.items()}
        starting = [n for n in MODELS if running[n] and not up[n]]
        seen.append(starting)
        assert len(starting) <= 1, seen  # never two vLLMs loading at once
        restarted = engine.api.inspect_container(CONTROLLER)["State"]["StartedAt"] != controller_started
        if all(up.values()) and restarted:
            break
        time.sleep(5)
    assert all(up.values()) and restarted, seen

    # the restarted controller answers before anything asks through it (a request that finds it still
    # starting is refused by the gateway with an OpenAI 503 "retry shortly", which a client may not retry)
    def controller_answers() -> bool:
        try:
            return call(f"http://{ip_on(engine, GPU)}:{CONTROLLER_PORT}/metrics", keys["backend"])[0] == 200
        except OSError:
            return False

    deadline = time.monotonic() + 60
    while not controller_answers() and time.monotonic() < deadline:
        time.sleep(1)
    assert controller_answers(), "the sleep controller did not answer within 60 s of its restart"
    api = openai.OpenAI(base_url=f"http://{ip_on(engine, GATEWAY)}:{HTTP_PORT}/v1", api_key=keys["alice"],
                        max_retries=0, timeout=300)  # fmt: skip
    for model in [*MODELS, *MODELS]:
        assert api.completions.create(model=model, prompt="hi", max_tokens=2).usage.completion_tokens >= 1
