"""The vllm_server role on the GPU node: container spec, local fact, idempotence, the watchdog."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import urllib.parse
from datetime import datetime

import openai
from conftest import (
    ADAPTERS,
    GPU,
    INTERNAL_NET,
    VLLM,
    VLLM_PORT,
    chat,
    explain,
    inventory_vars,
    ip_on,
    run_playbook,
    served_adapters,
    wait_until_serving,
)

testinfra_hosts = ["ansible://gpu_nodes"]

PROM = "/var/lib/prometheus/node-exporter/vllm_watchdog.prom"
LABELS = f'model="tiny",container="{VLLM}"'
INTERVAL = 10  # vllm_server_watchdog_interval in molecule.yml
TIMEOUT = 15  # vllm_server_watchdog_timeout in molecule.yml
FAILURES = 3
REVISION = "5f1c0de2a1b7e6d4c3b2a1908f7e6d5c4b3a2910"  # prepare.yml
CACHE_ROOT = "/srv/vf-serve-models/vllm-cache"  # vllm_server_cache_root in molecule.yml


def _fact(host) -> dict:
    return json.loads(host.file("/etc/ansible/facts.d/vllm_fleet.fact").content_string)


def _time(value: str) -> float:
    main, _, frac = value.rstrip("Z").partition(".")
    stamp = datetime.fromisoformat(main + "+00:00").timestamp()
    return stamp + (float("0." + frac[:6]) if frac else 0.0)


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{name}\{{{re.escape(LABELS)}\}} (\S+)$", text, re.M)
    assert match, f"{name} missing in:\n{text}"
    return float(match.group(1))


def test_container_spec(host, engine, vllm_url):
    attrs = engine.api.inspect_container(VLLM)
    host_config, config = attrs["HostConfig"], attrs["Config"]
    assert attrs["State"]["Running"]
    assert host_config["NetworkMode"] == f"container:{engine.api.inspect_container(GPU)['Id']}"
    assert host_config["IpcMode"] == "host"
    assert host_config["RestartPolicy"]["Name"] == "unless-stopped"
    model_dir = f"/srv/vf-serve-models/lab/tiny/{REVISION}"
    assert f"{model_dir}:{model_dir}:ro" in host_config["Binds"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_API_KEY"]
    assert env["VLLM_API_KEY"] not in " ".join(config["Cmd"])  # the key is never on the command line
    assert config["Cmd"][:3] == [model_dir, "--served-model-name", "tiny"]
    assert "--kv-cache-memory-bytes" in config["Cmd"] and "--enforce-eager" in config["Cmd"]
    # vLLM drains on SIGTERM within Docker's stop timeout (60 s), less 5 s to exit
    assert config["Cmd"][config["Cmd"].index("--shutdown-timeout") + 1] == "55"
    assert config["StopTimeout"] == 60
    assert config["Healthcheck"]["Test"][:2] == ["CMD", "python3"]
    assert config["Labels"]["io.vllm-fleet.model"] == "tiny"
    deadline = time.monotonic() + 90
    while attrs["State"]["Health"]["Status"] != "healthy" and time.monotonic() < deadline:
        time.sleep(3)
        attrs = engine.api.inspect_container(VLLM)
    assert attrs["State"]["Health"]["Status"] == "healthy"


def test_vllm_keeps_its_caches_in_the_image_folder_on_the_host(host, engine):
    attrs = engine.api.inspect_container(VLLM)
    folder = f"{CACHE_ROOT}/{attrs['Image'].removeprefix('sha256:')}"
    assert f"{folder}:/var/cache/vllm-fleet:rw" in attrs["HostConfig"]["Binds"]
    env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
    assert env["VLLM_CACHE_ROOT"] == "/var/cache/vllm-fleet/vllm"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/var/cache/vllm-fleet/torchinductor"
    assert env["PYTHONPATH"] == "/var/cache/vllm-fleet/python"
    assert host.file(folder).is_directory and host.file(folder).mode == 0o700
    # what vLLM wrote there at its start (the CPU build compiles its sampler with Inductor)
    assert host.file(f"{folder}/torchinductor").is_directory
    # `vllm download-kernels` ran once for the image, before the container: the CPU build has no FlashInfer
    stamp = host.file(f"{folder}/download-kernels.log").content_string
    assert "vllm download-kernels: exit 0" in stamp and "FlashInfer is not installed" in stamp
    # prepare.yml's folder of an image that is not on the host went; a folder not named by an image ID stays
    assert not host.file(f"{CACHE_ROOT}/{'e' * 64}").exists
    assert host.file(f"{CACHE_ROOT}/notes").is_directory


def test_vllm_listens_on_the_internal_address_only(host, engine):
    address = ip_on(engine, GPU, INTERNAL_NET)
    listening = host.check_output("ss -Hltn")
    assert f"{address}:{VLLM_PORT}" in listening
    assert f"0.0.0.0:{VLLM_PORT}" not in listening and f"*:{VLLM_PORT}" not in listening


def test_vllm_requires_the_backend_key(host, vllm_url, keys):
    assert chat(vllm_url, keys["alice"])[0] == 401
    assert chat(vllm_url, keys["backend"])[0] == 200


def test_local_fact_records_the_deployment_plan_and_measurement(host, engine):
    current = _fact(host)["models"]["tiny"]["current"]
    image = engine.api.inspect_image(current["image"])
    assert current["image_id"] == image["Id"]
    # the branch in the inventory (main) resolved through refs/main to the immutable revision folder
    assert current["model_path"] == f"/srv/vf-serve-models/lab/tiny/{REVISION}"
    assert current["revision"] == REVISION and current["requested_revision"] == "main"
    assert current["command"] == engine.api.inspect_container(VLLM)["Config"]["Cmd"]
    assert re.fullmatch(r"[0-9a-f]{16}", current["version"]) and re.fullmatch(
        r"[0-9a-f]{16}", current["config_hash"]
    )
    assert current["gpus"] == [0]
    # planned on the simulated H200, measured on the CPU build: both recorded side by side
    assert current["plan"]["tensor_parallel_size"] == 1 and current["plan"]["max_model_len"] == 512
    assert current["plan"]["kv_cache_tokens"] > 0
    # vLLM's own vllm:cache_config_info (source metrics) wins over the startup log's figures
    actual = current["actual"]
    expected = {
        "device": "CPU",
        "kv_cache_tokens": 65536,
        "max_concurrency": 128.0,
        "concurrency_tokens_per_request": 512,
        "kv_cache_gib": 0.06,
        "max_model_len": 512,
    }
    assert {k: actual.get(k) for k in expected} == expected
    assert actual["source"] == "metrics" and actual["num_gpu_blocks"] * actual["block_size"] == 65536
    assert current["plan_vs_actual"]["kv_cache_tokens"]["actual"] == 65536
    assert current["baseline"]["completion_seconds"] > 0 and current["baseline"]["ttft_seconds"] > 0
    assert "VLLM_API_KEY" not in json.dumps(current)
    facts = host.ansible("setup", "filter=ansible_local")["ansible_facts"]["ansible_local"]
    assert facts["vllm_fleet"]["models"]["tiny"]["current"]["version"] == current["version"]


def test_second_converge_restarted_no_container(host, engine):
    """The container started before the deployment was recorded; idempotence did not restart it."""
    current = _fact(host)["models"]["tiny"]["current"]
    started = _time(engine.api.inspect_container(VLLM)["State"]["StartedAt"])
    assert started <= _time(current["deployed_at"]) + 1


def test_watchdog_checks_a_healthy_vllm_and_leaves_it_alone(host, engine):
    timer = host.service("vllm-fleet-watchdog.timer")
    assert timer.is_enabled and timer.is_running
    started = engine.api.inspect_container(VLLM)["State"]["StartedAt"]
    deadline = time.monotonic() + 3 * INTERVAL + 10
    text = ""
    while time.monotonic() < deadline:
        text = host.file(PROM).content_string if host.file(PROM).exists else ""
        if text and time.time() - _metric(text, "vllm_watchdog_last_check_timestamp_seconds") < INTERVAL + 6:
            break
        time.sleep(2)
    assert _metric(text, "vllm_watchdog_up") == 1
    assert _metric(text, "vllm_watchdog_consecutive_failures") == 0
    assert _metric(text, "vllm_watchdog_restarts_total") == 0
    assert time.time() - _metric(text, "vllm_watchdog_last_success_timestamp_seconds") < 2 * INTERVAL + 10
    assert engine.api.inspect_container(VLLM)["State"]["StartedAt"] == started
    journal = host.check_output("journalctl -u vllm-fleet-watchdog.service --no-pager -n 50")
    assert f"container={VLLM} outcome=ok" in journal
    config = host.file("/etc/vllm-fleet/watchdog.json")
    assert config.mode == 0o600 and config.user == "root"


def _env(engine) -> dict[str, str]:
    return dict(item.split("=", 1) for item in engine.api.inspect_container(VLLM)["Config"]["Env"])


def _recap(result, host: str) -> str:
    lines = [line for line in result.stdout.splitlines() if line.startswith(host)]
    assert lines, explain(result)
    return lines[-1]


def test_bad_upgrade_fails_clearly_and_rollback_restores_the_running_version(host, engine, gateway_url, keys):
    before = _fact(host)["models"]["tiny"]
    models = inventory_vars("gpu_nodes")["vllm_server_models"]
    models[0]["extra_args"] = [*models[0].get("extra_args", []), "--frobnicate"]
    upgrade = run_playbook("playbooks/serve.yml", "-e", json.dumps({"vllm_server_models": models}))
    assert upgrade.returncode != 0
    output = upgrade.stdout + upgrade.stderr
    assert "unrecognized arguments: --frobnicate" in output and "vllm_server_models[].extra_args" in output
    assert keys["backend"] not in output
    # the failed version is not recorded; clients get an OpenAI-style error, not a hang
    assert _fact(host)["models"]["tiny"] == before
    status, _, raw = chat(gateway_url, keys["alice"])
    assert status in (502, 503) and json.loads(raw)["error"]["code"] == "backend_unavailable"

    rollback = run_playbook("molecule/serving/rollback.yml")
    assert rollback.returncode == 0, explain(rollback)
    restored = _fact(host)["models"]["tiny"]
    assert restored["current"]["version"] == before["current"]["version"]
    attrs = engine.api.inspect_container(VLLM)
    assert "--frobnicate" not in attrs["Config"]["Cmd"]
    assert (
        attrs["Config"]["Image"] == before["current"]["image"]
        and attrs["Image"] == before["current"]["image_id"]
    )
    assert chat(gateway_url, keys["alice"])[0] == 200

    # the inventory describes the restored version: a normal run changes and restarts nothing
    started = attrs["State"]["StartedAt"]
    again = run_playbook("playbooks/serve.yml")
    assert again.returncode == 0, explain(again)
    assert "changed=0" in _recap(again, GPU)
    assert engine.api.inspect_container(VLLM)["State"]["StartedAt"] == started


def test_a_stream_in_flight_when_the_container_stops_finishes(host, engine, vllm_url, keys):
    """docker stop (SIGTERM) while a long streaming completion runs: vLLM finishes it before it exits."""
    parsed = urllib.parse.urlparse(vllm_url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=180)
    body = {
        "model": "tiny",
        "prompt": "Once upon a time",
        "max_tokens": 480,
        # one sequence: vLLM's drain finishes running sequences, and with n > 1 the lab's small KV cache
        # leaves some of a request's sequences waiting, which the stop does not wait for
        "n": 1,
        "ignore_eos": True,
        "stream": True,
    }
    before = engine.api.inspect_container(VLLM)["State"]["StartedAt"]
    conn.request(
        "POST",
        "/v1/completions",
        json.dumps(body),
        {"Authorization": f"Bearer {keys['backend']}", "Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    assert resp.status == 200
    # SIGTERM as soon as vLLM has taken the request
    stopping = threading.Thread(target=engine.api.restart, args=(VLLM,), kwargs={"timeout": 60})
    stopping.start()
    stop_sent = time.monotonic()
    chunks, finish, done, last = 0, {}, False, stop_sent
    while line := resp.readline():  # chunked: readline decodes it
        if line.strip() == b"data: [DONE]":
            done = True
            break
        if line.startswith(b"data: "):
            chunks, last = chunks + 1, time.monotonic()
            # one chunk may carry several sequences when they come out of the same engine step
            for choice in json.loads(line[6:])["choices"]:
                finish[choice["index"]] = choice.get("finish_reason") or finish.get(choice["index"])
    conn.close()
    stopping.join(120)
    assert done and finish == {0: "length"}, f"cut after {chunks} chunks: {finish}"
    # the stop really came mid-stream: vLLM went on generating after it, and then the container restarted
    after = last - stop_sent
    assert after > 0.2, f"the stream ended {after:.2f} s after the stop: nothing was in flight"
    assert engine.api.inspect_container(VLLM)["State"]["StartedAt"] != before
    wait_until_serving(vllm_url, keys["backend"], timeout=600)


def test_watchdog_restarts_a_hung_vllm_within_its_window(host, engine, gateway_url, keys):
    before = engine.api.inspect_container(VLLM)["State"]["StartedAt"]
    restarts_before = _metric(host.file(PROM).content_string, "vllm_watchdog_restarts_total")
    # three failed checks (each up to the probe timeout) one interval apart, then the restart call;
    # timer runs slip by a few seconds on a loaded machine
    window = FAILURES * (INTERVAL + TIMEOUT) + INTERVAL + 30
    engine.api.pause(VLLM)
    paused_at = time.monotonic()
    try:
        while time.monotonic() - paused_at < window + 30:
            state = engine.api.inspect_container(VLLM)["State"]
            if state["StartedAt"] != before:
                break
            time.sleep(2)
        elapsed = time.monotonic() - paused_at
    finally:
        if engine.api.inspect_container(VLLM)["State"]["Paused"]:
            engine.api.unpause(VLLM)
    state = engine.api.inspect_container(VLLM)["State"]
    assert state["StartedAt"] != before, f"not restarted after {elapsed:.0f} s"
    assert elapsed <= window, f"restarted after {elapsed:.0f} s, window {window} s"
    assert state["Running"] and not state["Paused"]
    journal = host.check_output("journalctl -u vllm-fleet-watchdog.service --no-pager -n 80")
    assert f"container={VLLM} outcome=paused" in journal
    assert f"container={VLLM} action=restart" in journal
    assert keys["backend"] not in journal
    # serving again through the gateway; the restart is counted
    wait_until_serving(gateway_url, keys["alice"], timeout=600)
    assert _metric(host.file(PROM).content_string, "vllm_watchdog_restarts_total") == restarts_before + 1


def _wait_for_adapters(vllm_url: str, key: str) -> dict[str, str]:
    deadline = time.monotonic() + 6 * INTERVAL + 60
    served = served_adapters(vllm_url, key)
    while sorted(served) != ADAPTERS and time.monotonic() < deadline:
        time.sleep(2)
        served = served_adapters(vllm_url, key)
    assert sorted(served) == ADAPTERS, f"vLLM serves the adapters {sorted(served)}"
    return served


def test_a_restarted_container_gets_its_adapters_back_from_the_watchdog(
    host, engine, vllm_url, gateway_url, keys
):
    """A restart drops the adapters vLLM loaded at runtime; the watchdog loads them again once it serves.

    The restarts are the two above, neither made by the role: docker's mid-stream and the watchdog's own
    (one more start of the CPU vLLM would prove nothing more)."""
    restarted = _time(engine.api.inspect_container(VLLM)["State"]["StartedAt"])
    deployed = _time(_fact(host)["models"]["tiny"]["current"]["deployed_at"])
    assert restarted > deployed + 1, "vLLM has not restarted since its deployment"
    _wait_for_adapters(vllm_url, keys["backend"])
    journal = host.check_output("journalctl -u vllm-fleet-watchdog.service --no-pager")
    assert f"container={VLLM} action=load_adapter adapter=tiny-lora-a result=loaded" in journal
    assert f"container={VLLM} action=load_adapter adapter=tiny-lora-b result=loaded" in journal
    assert keys["backend"] not in journal
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=keys["alice"], max_retries=0, timeout=120)
    for adapter in ADAPTERS:
        reply = client.chat.completions.create(
            model=adapter, messages=[{"role": "user", "content": "Hello"}], max_tokens=4, temperature=0
        )
        assert reply.model == adapter
