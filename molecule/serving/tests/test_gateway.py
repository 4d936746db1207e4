"""The gateway in front of the real vLLM: keys, errors, limits, streaming, exposure, TLS, drain."""

from __future__ import annotations

import http.client
import json
import os
import re
import ssl
import time
import urllib.parse

import pytest
from conftest import (
    GATEWAY,
    GPU,
    HTTPS_PORT,
    INTERNAL_NET,
    PUBLIC_NET,
    VLLM_PORT,
    call,
    chat,
    explain,
    ip_on,
    run_playbook,
    wait_until_serving,
)

testinfra_hosts = ["ansible://gateways"]


def _error(body: bytes) -> dict:
    data = json.loads(body)
    assert set(data) == {"error"}, data
    assert {"message", "type", "code"} <= set(data["error"]), data
    return data["error"]


def test_chat_completion_with_a_valid_key(host, gateway_url, keys):
    status, headers, body = chat(gateway_url, keys["alice"], max_tokens=8)
    assert status == 200, body
    data = json.loads(body)
    assert data["object"] == "chat.completion" and data["model"] == "tiny"
    assert data["usage"]["completion_tokens"] == 8
    assert headers.get("X-Request-Id")


def test_models_lists_the_routed_models(host, gateway_url, keys):
    status, _, body = call(f"{gateway_url}/v1/models", keys["bob"])
    assert status == 200
    assert [m["id"] for m in json.loads(body)["data"]] == ["tiny", "tiny-lora-a", "tiny-lora-b"]


def _stream_arrivals(gateway_url: str, key: str, max_tokens: int) -> list[float]:
    """Seconds from the request to each SSE chunk of a streaming chat completion."""
    parsed = urllib.parse.urlparse(gateway_url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hello"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    start = time.monotonic()
    conn.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(body),
        {"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Content-Type", "").startswith("text/event-stream")
    arrivals = []
    done = False
    while True:
        line = resp.fp.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            if line.strip() == b"data: [DONE]":
                done = True
                break
            arrivals.append(time.monotonic() - start)
    conn.close()
    assert done, "the stream ended without [DONE]"
    # vLLM merges tokens into fewer chunks when its API server falls behind
    assert len(arrivals) >= 10, len(arrivals)
    return arrivals


def _span(arrivals: list[float]) -> tuple[float, float]:
    return round(arrivals[0], 3), round(arrivals[-1], 3)


def test_streaming_chunks_arrive_incrementally(host, gateway_url, vllm_url, keys):
    """Chunks are passed on as vLLM produces them, not held until the end.

    The gateway's filter is held to chunk-by-chunk delivery against a paced backend in
    tests/unit/roles/test_gateway_errors_nginx.py; this is the real path. A CPU vLLM whose engine
    shares a busy core now and then sends a whole answer at once from its own port too, hence up
    to six attempts, each with vLLM's own port beside it for the record. A buffering proxy fails
    them all.
    """
    spans = []
    for _ in range(6):
        first, last = _span(_stream_arrivals(gateway_url, keys["alice"], 400))
        if last - first > 0.1 and first < last / 2:
            return
        direct = _span(_stream_arrivals(vllm_url, keys["backend"], 400))
        spans.append({"gateway": (first, last), "vllm": direct})
    raise AssertionError(f"every stream arrived in one burst (first, last chunk in s): {spans}")


@pytest.mark.parametrize(
    ("key", "code"),
    [(None, "missing_api_key"), ("wrong-key-0123456789abcdef", "invalid_api_key"), ("", "missing_api_key")],
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models"])
def test_401_without_a_valid_key(host, gateway_url, key, code, path):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "x"}]} if "chat" in path else None
    status, headers, raw = call(f"{gateway_url}{path}", key, body)
    assert status == 401
    assert headers["Content-Type"] == "application/json"
    error = _error(raw)
    assert error["code"] == code and error["type"] == "invalid_request_error"


def test_backend_key_is_not_a_client_key(host, gateway_url, keys):
    status, _, raw = chat(gateway_url, keys["backend"])
    assert status == 401 and _error(raw)["code"] == "invalid_api_key"


def test_unknown_model_is_an_openai_404(host, gateway_url, keys):
    status, _, raw = chat(gateway_url, keys["alice"], model="gpt-4o")
    assert status == 404
    error = _error(raw)
    assert error["code"] == "model_not_found" and error["param"] == "model" and "gpt-4o" in error["message"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [("not json", 400, "invalid_json"), (json.dumps({"messages": []}), 400, "missing_model")],
)
def test_bad_bodies_are_openai_errors(host, gateway_url, keys, body, status, code):
    parsed = urllib.parse.urlparse(gateway_url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", body, {"Authorization": f"Bearer {keys['alice']}"})
    resp = conn.getresponse()
    assert resp.status == status
    assert _error(resp.read())["code"] == code


def test_429_past_the_rate_limit_for_that_key_only(host, gateway_url, keys):
    statuses = []
    limited = None
    for _ in range(8):  # tier "tight": 6 requests/minute, burst 2
        status, headers, raw = call(f"{gateway_url}/v1/models", keys["slowpoke"])
        statuses.append(status)
        if status == 429:
            limited = (headers, raw)
    assert 429 in statuses and statuses[0] == 200, statuses
    headers, raw = limited
    assert headers.get("Retry-After") == "1"
    error = _error(raw)
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error"
    # another key is not limited by slowpoke's requests
    assert call(f"{gateway_url}/v1/models", keys["alice"])[0] == 200


@pytest.mark.parametrize(
    "path", ["/metrics", "/health/../metrics", "/v1/../metrics", "/tokenize", "/version"]
)
def test_vllm_endpoints_are_not_exposed(host, gateway_url, keys, path):
    status, _, raw = call(f"{gateway_url}{path}", keys["alice"])
    assert status == 404
    assert b"vllm:" not in raw
    assert _error(raw)["code"] == "unknown_url"


def test_vllm_port_not_reachable_from_the_public_side(host, engine, keys):
    """A client on the gateway's public network reaches the gateway, not vLLM."""
    gpu_ip = ip_on(engine, GPU, INTERNAL_NET)
    script = (
        f"curl -s -m 3 -o /dev/null -w 'gateway=%{{http_code}}\\n' http://gateway:8080/health; "
        f"curl -s -m 3 -o /dev/null -w 'direct=%{{http_code}}\\n' http://{gpu_ip}:{VLLM_PORT}/health; "
        f"curl -s -m 3 -o /dev/null -w 'via_gateway=%{{http_code}}\\n' http://gateway:{VLLM_PORT}/health; "
        "true"
    )
    out = engine.containers.run(
        os.environ["MOLECULE_IMAGE"], ["-c", script], entrypoint="/bin/sh", network=PUBLIC_NET, remove=True
    ).decode()
    assert "gateway=200" in out, out
    assert "direct=000" in out and "via_gateway=000" in out, out


def test_tls_with_the_self_signed_certificate(host, engine, keys):
    address = ip_on(engine, GATEWAY, PUBLIC_NET)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(address, HTTPS_PORT, timeout=30, context=context)
    conn.request("GET", "/v1/models", headers={"Authorization": f"Bearer {keys['alice']}"})
    resp = conn.getresponse()
    assert resp.status == 200 and b'"tiny"' in resp.read()
    cert = conn.sock.getpeercert(binary_form=True)
    assert cert


def test_access_log_names_the_key_never_the_key(host, keys):
    log = host.file("/var/log/nginx/access.log").content_string
    lines = [line for line in log.splitlines() if "POST /v1/chat/completions" in line and " 200 " in line]
    assert lines
    assert lines[-1].split(" ")[2] in {"alice", "bob", "slowpoke"}
    assert 'model="tiny"' in lines[-1] and "upstream=" in lines[-1] and "upstream_header_time=" in lines[-1]
    for secret in keys.values():
        assert secret not in log
    for path in ("/etc/nginx/vllm-fleet/clients.conf", "/etc/nginx/conf.d/vllm-fleet-gateway.conf"):
        text = host.file(path).content_string
        assert keys["alice"] not in text and keys["backend"] not in text
    auth = host.file("/etc/nginx/vllm-fleet/backend-auth.conf")
    assert auth.mode == 0o600 and auth.user == "root"


def test_gateway_config_is_streaming_safe(host):
    text = host.file("/etc/nginx/vllm-fleet/proxy.conf").content_string
    for line in ("proxy_buffering off;", "proxy_http_version 1.1;", 'proxy_set_header Connection "";'):
        assert line in text
    assert "proxy_read_timeout 3600s;" in text
    conf = host.file("/etc/nginx/vllm-fleet/upstreams.conf").content_string
    assert "keepalive 64;" in conf
    assert "keepalive_timeout 4s;" in conf  # below vLLM's 5 s: never a POST on a connection vLLM is closing
    # every host is also a never-failed backup in each upstream (the model's and each LoRA adapter's),
    # so the last live one is not taken out by passive marking
    upstreams = re.findall(r"^upstream \S+ \{", conf, re.M)
    assert len(upstreams) == 3  # tiny, tiny-lora-a, tiny-lora-b
    assert len(re.findall(r"^\s*server \S+ max_fails=0 backup;\s*# host=", conf, re.M)) == len(upstreams)
    host.run_expect([0], "nginx -t -q")


def test_drain_refuses_to_take_the_last_replica(host, gateway_url, keys):
    result = run_playbook("molecule/serving/drain.yml")
    assert result.returncode != 0
    assert "gateway_drain_allow_downtime" in result.stdout + result.stderr
    assert chat(gateway_url, keys["alice"])[0] == 200


def test_drain_holds_across_gateway_runs_and_undrain_restores(host, gateway_url, keys):
    drained = run_playbook("molecule/serving/drain.yml", "-e", "gateway_drain_allow_downtime=true")
    try:
        assert drained.returncode == 0, explain(drained)
        assert host.file(f"/etc/nginx/vllm-fleet/drained/{GPU}").exists
        status, _, raw = chat(gateway_url, keys["alice"])
        assert status == 503 and _error(raw)["code"] == "backend_unavailable"
        # a normal gateway run keeps the drain and changes nothing
        again = run_playbook("playbooks/gateway.yml")
        assert again.returncode == 0, explain(again)
        recap = [line for line in again.stdout.splitlines() if line.startswith(GATEWAY)]
        assert recap and "changed=0" in recap[0], recap
        # the host's line and its backup line, in the model's upstream and in each adapter's
        conf = host.file("/etc/nginx/vllm-fleet/upstreams.conf").content_string
        assert conf.count(" down;") == 2 * len(re.findall(r"^upstream \S+ \{", conf, re.M)) == 6
    finally:
        undrained = run_playbook("molecule/serving/drain.yml", "-e", "vf_serve_action=undrain")
    assert undrained.returncode == 0, explain(undrained)
    assert not host.file(f"/etc/nginx/vllm-fleet/drained/{GPU}").exists
    assert " down;" not in host.file("/etc/nginx/vllm-fleet/upstreams.conf").content_string
    wait_until_serving(gateway_url, keys["alice"], timeout=30)
