"""Exporters on every host of the monitoring scenario."""

import re

import pytest


def test_node_exporter_runs_with_the_textfile_collector(host):
    service = host.service("prometheus-node-exporter")
    assert service.is_running and service.is_enabled
    assert host.socket("tcp://0.0.0.0:9100").is_listening or host.socket("tcp://:::9100").is_listening
    args = host.file("/etc/default/prometheus-node-exporter").content_string
    assert "--collector.textfile.directory=/var/lib/prometheus/node-exporter" in args
    textfile_dir = host.file("/var/lib/prometheus/node-exporter")
    assert textfile_dir.is_directory and textfile_dir.mode == 0o755


def test_textfile_metrics_are_exported(host):
    """A file dropped in the textfile directory (as the watchdog does) shows up in /metrics."""
    path = "/var/lib/prometheus/node-exporter/verify_probe.prom"
    host.run_expect([0], f"printf 'verify_probe_value 42\\n' > {path}.tmp && mv {path}.tmp {path}")
    try:
        metrics = host.check_output("curl -sf http://127.0.0.1:9100/metrics")
        assert re.search(r"^verify_probe_value 42$", metrics, re.M)
        assert re.search(r"^node_textfile_scrape_error 0$", metrics, re.M)
    finally:
        host.run(f"rm -f {path}")


@pytest.mark.parametrize("unit", ["vllm-fleet-gpu-driver-check.timer"])
def test_gpu_driver_check_only_on_gpu_nodes(host, unit):
    is_gpu = "gpu_nodes" in host.ansible.get_variables()["group_names"]
    assert host.file(f"/etc/systemd/system/{unit}").exists == is_gpu
    if is_gpu:
        assert host.service(unit).is_enabled
        metrics = host.check_output("curl -sf http://127.0.0.1:9100/metrics")
        # No NVIDIA driver on the test node: no mismatch, nvidia-smi reported missing.
        assert re.search(r"^vllm_fleet_gpu_driver_library_mismatch 0$", metrics, re.M)
        assert 'nvidia_smi="missing"' in metrics
