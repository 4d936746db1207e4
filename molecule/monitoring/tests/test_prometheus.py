"""Real Prometheus scraping the real vLLM; target-down alert fires and resolves."""

import json
import os
import time
import urllib.parse

import docker
import pytest

testinfra_hosts = ["ansible://monitoring"]

VLLM_CONTAINER = "vf-mon-vllm-gpu1"
SERVING_HOSTS = {"vf-mon-gpu1"}
TARGET_DOWN_FOR = 20  # monitoring_alert_target_down_for in molecule.yml
SCRAPE_AND_EVAL = 5 + 5  # scrape interval + evaluation interval


def api(host, path, **params):
    url = f"http://127.0.0.1:9090/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    body = json.loads(host.check_output(f"curl -sf '{url}'"))
    assert body["status"] == "success", body
    return body["data"]


def wait_for(predicate, timeout, interval=2.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def expected_version():
    image = os.environ.get("VLLM_FLEET_VLLM_IMAGE", "")
    return image.rsplit("/", 1)[-1].split(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"


def test_prometheus_runs_with_a_valid_config(host):
    assert host.service("prometheus").is_running and host.service("prometheus").is_enabled
    host.run_expect([0], "promtool check config /etc/prometheus/prometheus.yml")
    host.run_expect([0], "promtool check rules /etc/prometheus/rules/vllm-fleet.rules.yml")


def test_rules_are_loaded_with_the_configured_for(host):
    groups = api(host, "rules")["groups"]
    rules = {r["name"]: r for g in groups for r in g["rules"] if r["type"] == "alerting"}
    assert rules["VllmTargetDown"]["duration"] == TARGET_DOWN_FOR
    assert {"VllmKvCacheNearlyFull", "GatewayHigh5xxRate", "GpuDriverLibraryMismatch"} <= set(rules)


def test_every_target_is_up(host):
    def all_up():
        active = api(host, "targets", state="active")["activeTargets"]
        return active if active and all(t["health"] == "up" for t in active) else None

    active = wait_for(all_up, 90)
    assert active, api(host, "targets", state="active")
    jobs = {t["labels"]["job"] for t in active}
    # no DCGM: the GPU node has no GPU, so the exporter is skipped and not scraped
    assert jobs == {"prometheus", "vllm", "node", "nginx", "nginx_log"}
    node_hosts = {t["labels"]["host"] for t in active if t["labels"]["job"] == "node"}
    assert node_hosts == {"vf-mon-monitor", "vf-mon-gpu1"}


def test_one_vllm_series_per_serving_host_with_labels(host):
    def series():
        result = api(host, "query", query="vllm:num_requests_running")["result"]
        return result if result else None

    result = wait_for(series, 90)
    assert result, "vllm:num_requests_running returned nothing"
    assert len(result) == len(SERVING_HOSTS)
    labels = result[0]["metric"]
    assert {r["metric"]["host"] for r in result} == SERVING_HOSTS
    assert labels["job"] == "vllm"
    assert labels["model"] == "tiny" and labels["model_name"] == "tiny"
    assert labels["gpu_group"] == "mon_h200"
    assert labels["version"] == expected_version()
    assert labels["instance"] == "gpu1:8000"


def _target_down_alert(host):
    alerts = api(host, "alerts")["alerts"]
    return [
        a
        for a in alerts
        if a["labels"]["alertname"] == "VllmTargetDown" and a["labels"].get("host") == "vf-mon-gpu1"
    ]


@pytest.fixture()
def vllm_container():
    container = docker.from_env().containers.get(VLLM_CONTAINER)
    yield container
    container.reload()
    if container.status != "running":
        container.start()


def test_target_down_alert_fires_within_its_for_and_resolves(host, vllm_container):
    assert not _target_down_alert(host), "VllmTargetDown is active before the test"
    stopped_at = time.monotonic()
    vllm_container.stop(timeout=10)

    pending = wait_for(lambda: [a for a in _target_down_alert(host) if a["state"] == "pending"], 60, 1)
    assert pending, "the alert never went pending after vLLM stopped"
    firing = wait_for(lambda: [a for a in _target_down_alert(host) if a["state"] == "firing"], 90, 1)
    fired_after = time.monotonic() - stopped_at
    assert firing, "VllmTargetDown did not fire"
    assert TARGET_DOWN_FOR <= fired_after + 1 <= TARGET_DOWN_FOR + SCRAPE_AND_EVAL + 25, fired_after
    alert = firing[0]
    assert alert["labels"]["severity"] == "critical" and alert["labels"]["model"] == "tiny"
    assert "vf-mon-gpu1" in alert["annotations"]["summary"]

    vllm_container.start()
    resolved = wait_for(lambda: not _target_down_alert(host), 300, 3)
    assert resolved, "VllmTargetDown still active after vLLM came back"
    up = api(host, "query", query='up{job="vllm", host="vf-mon-gpu1"}')["result"]
    assert up and up[0]["value"][1] == "1"
