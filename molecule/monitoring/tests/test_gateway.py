"""Gateway metrics: stub_status exporter and response codes from the access log (mtail)."""

import re
import time

testinfra_hosts = ["ansible://gateways"]


def test_stub_status_exporter(host):
    assert host.service("prometheus-nginx-exporter").is_running
    metrics = host.check_output("curl -sf http://127.0.0.1:9113/metrics")
    assert re.search(r"^nginx_up 1$", metrics, re.M)
    # stub_status is served on the loopback address only
    assert host.socket("tcp://127.0.0.1:8089").is_listening


def test_stub_status_exporter_outlives_an_nginx_outage(host):
    """The exporter exits while stub_status is down; it must come back, not hit systemd's start limit."""
    host.run_expect([0], "systemctl stop nginx")
    try:
        # Longer than five restarts inside systemd's default 10 s start-limit window.
        time.sleep(15)
    finally:
        host.run_expect([0], "systemctl start nginx")
    deadline = time.monotonic() + 30
    while True:
        answer = host.run("curl -sf http://127.0.0.1:9113/metrics")
        if answer.rc == 0 and re.search(r"^nginx_up 1$", answer.stdout, re.M):
            break
        assert time.monotonic() < deadline, host.run("systemctl status prometheus-nginx-exporter").stdout
        time.sleep(1)


def test_mtail_counts_responses_by_status(host):
    assert host.service("mtail").is_running
    host.run_expect([0], "curl -s -o /dev/null http://127.0.0.1/")
    host.run_expect([0], "curl -s -o /dev/null http://127.0.0.1/no-such-page")
    pattern = re.compile(r'^nginx_http_responses_total\{[^}]*status="404"[^}]*\} [1-9]', re.M)
    deadline = time.monotonic() + 30
    while True:
        metrics = host.check_output("curl -sf http://127.0.0.1:3903/metrics")
        if pattern.search(metrics) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert pattern.search(metrics), metrics[-2000:]
    assert re.search(r'^nginx_http_responses_total\{[^}]*status="200"', metrics, re.M)
