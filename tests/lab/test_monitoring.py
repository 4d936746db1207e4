"""The deployed lab's monitoring as an operator checks it: run against the lab `tests/collection/deploy`
deployed (converged once, tested many times: these were molecule/monitoring's verifications, on stand-ins).

Real Prometheus scrapes the real CPU vLLMs, node exporters, the gateway's stub_status exporter and mtail;
VllmTargetDown fires within its `for` when a vLLM stops answering and resolves when it answers again.
Expectations come from the lab inventory and from the deployment each host recorded, never restated.

Usage (the lab up): python -m pytest -p no:cacheprovider tests/lab/test_monitoring.py
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import testinfra
import yaml

ROOT = Path(__file__).resolve().parents[2]
ENGINE = testinfra.get_host("local://")  # the machine's Docker engine, which runs the lab's containers
INVENTORY = ROOT / "inventories" / "lab"
HOSTS = yaml.safe_load((INVENTORY / "hosts.yml").read_text())["all"]["children"]
MONITORING = yaml.safe_load((INVENTORY / "group_vars/monitoring/monitoring.yml").read_text())
GATEWAY = yaml.safe_load((INVENTORY / "group_vars/gateways/gateway.yml").read_text())


def _seconds(text: str) -> int:
    return int(text.removesuffix("s"))


TARGET_DOWN_FOR = _seconds(MONITORING["monitoring_alert_target_down_for"])
SCRAPE_AND_EVAL = _seconds(MONITORING["monitoring_prometheus_scrape_interval"]) + _seconds(
    MONITORING["monitoring_prometheus_evaluation_interval"]
)
# GPU host -> its GPU group (the label Prometheus gives its series)
GPU_GROUPS = {host: group for group, spec in HOSTS["gpu_nodes"]["children"].items() for host in spec["hosts"]}


def _hosts(spec: dict[str, Any]) -> set[str]:
    found = set(spec.get("hosts") or {})
    for child in (spec.get("children") or {}).values():
        found |= _hosts(child)
    return found


ALL_HOSTS = set().union(*(_hosts(spec) for spec in HOSTS.values()))


def lab(host: str) -> Any:
    """The lab host as testinfra sees it (its container, over Docker)."""
    return testinfra.get_host(f"docker://vllm-fleet-lab-{host.removeprefix('lab-')}")


def records(host: str) -> dict[str, Any]:
    """The deployments vllm_server recorded on host: model -> its current record."""
    fact = json.loads(lab(host).file("/etc/ansible/facts.d/vllm_fleet.fact").content_string)
    return {name: entry["current"] for name, entry in fact["models"].items()}


def api(path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:9090/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    body = json.loads(lab("lab-monitor").check_output(f"curl -sf '{url}'"))
    assert body["status"] == "success", body
    return body["data"]


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


# --- Prometheus -------------------------------------------------------------------------------------


def test_prometheus_runs_with_a_valid_config():
    monitor = lab("lab-monitor")
    assert monitor.service("prometheus").is_running and monitor.service("prometheus").is_enabled
    monitor.run_expect([0], "promtool check config /etc/prometheus/prometheus.yml")
    monitor.run_expect([0], "promtool check rules /etc/prometheus/rules/vllm-fleet.rules.yml")


def test_rules_are_loaded_with_the_configured_for():
    rules = {r["name"]: r for g in api("rules")["groups"] for r in g["rules"] if r["type"] == "alerting"}
    assert rules["VllmTargetDown"]["duration"] == TARGET_DOWN_FOR
    assert {"VllmKvCacheNearlyFull", "GatewayHigh5xxRate", "GpuDriverLibraryMismatch"} <= set(rules)


def test_every_target_is_up():
    def all_up() -> Any:
        active = api("targets", state="active")["activeTargets"]
        return active if active and all(t["health"] == "up" for t in active) else None

    active = wait_for(all_up, 90)
    assert active, [(t["labels"], t["health"]) for t in api("targets", state="active")["activeTargets"]]
    # no DCGM: the lab's GPUs are simulated (dcgm_exporter_enabled: false), so nothing to scrape there
    assert {t["labels"]["job"] for t in active} == {"prometheus", "vllm", "node", "nginx", "nginx_log"}
    assert {t["labels"]["host"] for t in active if t["labels"]["job"] == "node"} == ALL_HOSTS


def test_one_vllm_series_per_recorded_model_with_its_labels():
    expected = {(host, name): rec for host in GPU_GROUPS for name, rec in records(host).items()}

    def series() -> Any:
        result = api("query", query="vllm:num_requests_running")["result"]
        return result if len(result) >= len(expected) else None

    result = wait_for(series, 90) or api("query", query="vllm:num_requests_running")["result"]
    got = {(r["metric"]["host"], r["metric"]["model"]): r["metric"] for r in result}
    assert set(got) == set(expected)
    for (host, name), labels in got.items():
        rec = expected[(host, name)]
        assert labels["job"] == "vllm" and labels["model_name"] == name
        assert labels["gpu_group"] == GPU_GROUPS[host]
        assert labels["version"] == rec["image"].rsplit(":", 1)[-1]
        assert labels["instance"] == f"{rec['listen_address']}:{rec['port']}"


def _target_down(host: str, model: str) -> list[dict[str, Any]]:
    return [
        a
        for a in api("alerts")["alerts"]
        if a["labels"]["alertname"] == "VllmTargetDown"
        and a["labels"].get("host") == host
        and a["labels"].get("model") == model
    ]


@pytest.fixture()
def silent_vllm():
    """The last GPU host's first model, frozen (docker pause: it stops answering, as a hung vLLM does) and
    put under maintenance on its host so its watchdog leaves it alone; both undone whatever happens."""
    host = list(GPU_GROUPS)[-1]
    model, record = sorted(records(host).items())[0]
    node, container = lab(host), record["container"]
    marker = f"/run/vllm-fleet/maintenance/{container}"
    node.run_expect([0], f"mkdir -p /run/vllm-fleet/maintenance && touch {marker}")
    try:
        yield host, model, container
    finally:
        ENGINE.run(f"docker unpause {container}")  # the test unpauses it; this is for a test that failed
        node.run(f"rm -f {marker}")


def test_target_down_alert_fires_within_its_for_and_resolves(silent_vllm):
    host, model, container = silent_vllm
    assert not _target_down(host, model), "VllmTargetDown is active before the test"
    silenced_at = time.monotonic()
    ENGINE.run_expect([0], f"docker pause {container}")

    pending = wait_for(lambda: [a for a in _target_down(host, model) if a["state"] == "pending"], 60, 1)
    assert pending, f"the alert never went pending after {container} stopped answering"
    firing = wait_for(lambda: [a for a in _target_down(host, model) if a["state"] == "firing"], 90, 1)
    fired_after = time.monotonic() - silenced_at
    assert firing, "VllmTargetDown did not fire"
    assert TARGET_DOWN_FOR <= fired_after + 1 <= TARGET_DOWN_FOR + SCRAPE_AND_EVAL + 25, fired_after
    alert = firing[0]
    assert alert["labels"]["severity"] == "critical"
    assert host in alert["annotations"]["summary"]

    ENGINE.run_expect([0], f"docker unpause {container}")
    assert wait_for(lambda: not _target_down(host, model), 120, 3), "VllmTargetDown still active"
    up = api("query", query=f'up{{job="vllm", host="{host}", model="{model}"}}')["result"]
    assert up and up[0]["value"][1] == "1"


# --- exporters on every host ------------------------------------------------------------------------


@pytest.mark.parametrize("host", sorted(ALL_HOSTS))
def test_node_exporter_runs_with_the_textfile_collector(host):
    node = lab(host)
    service = node.service("prometheus-node-exporter")
    assert service.is_running and service.is_enabled
    assert node.socket("tcp://0.0.0.0:9100").is_listening or node.socket("tcp://:::9100").is_listening
    args = node.file("/etc/default/prometheus-node-exporter").content_string
    assert "--collector.textfile.directory=/var/lib/prometheus/node-exporter" in args
    textfile_dir = node.file("/var/lib/prometheus/node-exporter")
    assert textfile_dir.is_directory and textfile_dir.mode == 0o755


def test_textfile_metrics_are_exported():
    """A file dropped in the textfile directory (as the watchdog does) shows up in /metrics."""
    node = lab(sorted(GPU_GROUPS)[0])
    path = "/var/lib/prometheus/node-exporter/verify_probe.prom"
    node.run_expect([0], f"printf 'verify_probe_value 42\\n' > {path}.tmp && mv {path}.tmp {path}")
    try:
        metrics = node.check_output("curl -sf http://127.0.0.1:9100/metrics")
        assert re.search(r"^verify_probe_value 42$", metrics, re.M)
        assert re.search(r"^node_textfile_scrape_error 0$", metrics, re.M)
    finally:
        node.run(f"rm -f {path}")


@pytest.mark.parametrize("host", sorted(ALL_HOSTS))
def test_gpu_driver_check_only_on_gpu_nodes(host):
    node, unit = lab(host), "vllm-fleet-gpu-driver-check.timer"
    is_gpu = host in GPU_GROUPS
    assert node.file(f"/etc/systemd/system/{unit}").exists == is_gpu
    if is_gpu:
        assert node.service(unit).is_enabled
        metrics = node.check_output("curl -sf http://127.0.0.1:9100/metrics")
        # no NVIDIA kernel module or NVML library on a lab node: no mismatch
        assert re.search(r"^vllm_fleet_gpu_driver_library_mismatch 0$", metrics, re.M)
        # and the check says how `nvidia-smi -L` answers there (the stand-in replays no -L capture)
        smi = node.run("nvidia-smi -L")
        said = "missing" if smi.rc == 127 else ("ok" if smi.rc == 0 else "error")
        assert f'nvidia_smi="{said}"' in metrics


# --- the gateway's metrics --------------------------------------------------------------------------


def test_stub_status_exporter():
    gateway = lab("lab-gateway")
    assert gateway.service("prometheus-nginx-exporter").is_running
    metrics = gateway.check_output("curl -sf http://127.0.0.1:9113/metrics")
    assert re.search(r"^nginx_up 1$", metrics, re.M)
    # stub_status is served on the loopback address only
    assert gateway.socket("tcp://127.0.0.1:8089").is_listening


def test_stub_status_exporter_outlives_an_nginx_outage():
    """The exporter exits while stub_status is down; it must come back, not hit systemd's start limit."""
    gateway = lab("lab-gateway")
    gateway.run_expect([0], "systemctl stop nginx")
    try:
        time.sleep(15)  # longer than five restarts inside systemd's default 10 s start-limit window
    finally:
        gateway.run_expect([0], "systemctl start nginx")

    def exporter_up() -> bool:
        answer = gateway.run("curl -sf http://127.0.0.1:9113/metrics")
        return answer.rc == 0 and bool(re.search(r"^nginx_up 1$", answer.stdout, re.M))

    assert wait_for(exporter_up, 30, 1), gateway.run("systemctl status prometheus-nginx-exporter").stdout


def test_mtail_counts_responses_by_status():
    gateway, port = lab("lab-gateway"), GATEWAY["gateway_http_port"]
    key = GATEWAY["gateway_client_keys"][0]["key"]
    assert gateway.service("mtail").is_running
    gateway.run_expect(
        [0], f"curl -s -o /dev/null -H 'Authorization: Bearer {key}' http://127.0.0.1:{port}/v1/models"
    )
    gateway.run_expect([0], f"curl -s -o /dev/null http://127.0.0.1:{port}/no-such-page")
    pattern = re.compile(r'^nginx_http_responses_total\{[^}]*status="404"[^}]*\} [1-9]', re.M)

    def metrics() -> str:
        return gateway.check_output("curl -sf http://127.0.0.1:3903/metrics")

    assert wait_for(lambda: pattern.search(metrics()), 30, 1), metrics()[-2000:]
    assert re.search(r'^nginx_http_responses_total\{[^}]*status="200"', metrics(), re.M)
