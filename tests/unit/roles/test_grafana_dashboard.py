"""The fleet's Grafana dashboard and the metric names used by it and by the alert rules.

Every metric a panel or an alert reads must exist: in a real vLLM /metrics capture
(tests/data/monitoring/vllm-0.32.0-cpu*.metrics), among the DCGM fields the dcgm_exporter
role exports, in the mtail program, or in tests/data/monitoring/known-metrics.yml.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "roles" / "grafana" / "files" / "dashboards" / "vllm-fleet.json"
RULES = (
    ROOT / "roles" / "monitoring" / "templates" / "etc" / "prometheus" / "rules" / "vllm-fleet.rules.yml.j2"
)
DATA = ROOT / "tests" / "data" / "monitoring"
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "by", "without", "on", "ignoring", "group_left", "group_right",
    "rate", "irate", "increase", "delta", "deriv", "histogram_quantile", "label_values", "vector", "time",
    "and", "or", "unless", "bool", "offset", "le", "abs", "clamp_min", "clamp_max",
}  # fmt: skip


def known_metrics() -> set[str]:
    names = set()
    for capture in DATA.glob("vllm-*.metrics"):  # the plain start, and each feature's (SOURCE.md)
        for line in capture.read_text().splitlines():
            if line and not line.startswith("#"):
                names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    for group in yaml.safe_load((DATA / "known-metrics.yml").read_text()).values():
        names.update(group)
    dcgm = yaml.safe_load((ROOT / "roles" / "dcgm_exporter" / "vars" / "main.yml").read_text())
    names.update(field[0] for field in dcgm["__dcgm_exporter_counters"])
    mtail = (
        ROOT / "roles" / "nginx_exporter" / "templates" / "etc" / "mtail" / "vllm_fleet_nginx.mtail.j2"
    ).read_text()
    names.update(re.findall(r"^counter (\w+)", mtail, re.M))
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names read by a PromQL expression (Jinja placeholders of the rules template ignored)."""
    expr = re.sub(r"\[\[.*?\]\]", "0", expr)  # Jinja variables of the rules template
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # range durations
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)  # label lists
    names = set()
    for match in re.finditer(r"(?<![\w:.$])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", expr):
        if match.group(2) is None and match.group(1) not in PROMQL_WORDS:
            names.add(match.group(1))
    return names


def panels(dashboard: dict) -> list[dict]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels") or [])
    return found


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def test_dashboard_identity(dashboard):
    assert dashboard["uid"] == "vllm-fleet"
    assert dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert "id" not in dashboard or dashboard["id"] is None  # provisioned dashboards carry no database id


def test_panels_are_well_formed(dashboard):
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        assert all(t["expr"].strip() for t in panel["targets"]), panel["title"]


def test_panels_do_not_overlap(dashboard):
    cells = {}
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_template_variables_used_are_defined(dashboard):
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    text = json.dumps(dashboard["panels"]) + json.dumps(dashboard["templating"])
    used = set(re.findall(r"\$\{?([A-Za-z_]\w*)", text)) - {"__all", "__interval", "__rate_interval"}
    assert used <= defined, f"undefined variables: {used - defined}"


@pytest.mark.parametrize(
    ("what", "metric"),
    [
        ("per-model request rate", "vllm:request_success_total"),
        ("TTFT percentiles", "vllm:time_to_first_token_seconds_bucket"),
        ("inter-token latency percentiles", "vllm:inter_token_latency_seconds_bucket"),
        ("KV-cache usage", "vllm:kv_cache_usage_perc"),
        ("KV-cache usage on older vLLM", "vllm:gpu_cache_usage_perc"),
        ("queue depth", "vllm:num_requests_waiting"),
        ("running requests", "vllm:num_requests_running"),
        ("GPU utilisation", "DCGM_FI_DEV_GPU_UTIL"),
        ("GPU memory", "DCGM_FI_DEV_FB_USED"),
        ("speculative decoding: tokens per step", "vllm:spec_decode_num_drafts_total"),
        ("speculative decoding: accepted tokens", "vllm:spec_decode_num_accepted_tokens_total"),
        ("per-position draft acceptance", "vllm:spec_decode_num_accepted_tokens_per_pos_total"),
        ("prefix-cache hits per tier (device, host)", "vllm:prompt_tokens_cached_by_source_total"),
        ("KV connector (offload tier) hits", "vllm:external_prefix_cache_hits_total"),
        ("sleeping models", "vllm:engine_sleep_state"),
    ],
)
def test_dashboard_shows(dashboard, what, metric):
    exprs = [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    assert any(metric in metric_names(e) for e in exprs), f"no panel shows {what} ({metric})"


def test_dashboard_metrics_exist(dashboard):
    known = known_metrics()
    unknown = {
        (panel["title"], name)
        for panel in panels(dashboard)
        for target in panel.get("targets", [])
        for name in metric_names(target["expr"])
        if name not in known
    }
    assert not unknown, f"panels read metrics nothing exports: {sorted(unknown)}"


def test_alert_rule_metrics_exist():
    known = known_metrics()
    exprs = re.findall(r"expr: >-\n((?:\s{10}.*\n)+)|expr: (.*)", RULES.read_text())
    names = set()
    for block, line in exprs:
        names |= metric_names(block or line)
    assert len(names) >= 12, names  # the parser found the rules' metrics
    assert names - known == set(), f"alert rules read metrics nothing exports: {sorted(names - known)}"


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('sum by (model) (rate(vllm:request_success_total{job="vllm", model=~"$model"}[5m]))',
         {"vllm:request_success_total"}),
        ('up{job="vllm"} == 0', {"up"}),
        ('a{x="b{c}"} / b_total{}', {"a", "b_total"}),
        ("time() - vllm_watchdog_last_success_timestamp_seconds > [[ limit ]]",
         {"vllm_watchdog_last_success_timestamp_seconds"}),
        ("increase(c_total[1h]) >= 3", {"c_total"}),
        ("sum by (job, host) (rate(x_total[5m])) / ignoring(status) y", {"x_total", "y"}),
        ('histogram_quantile(0.99, sum by (le) (rate(h_bucket{le="+Inf"}[5m])))', {"h_bucket"}),
    ],
)  # fmt: skip
def test_metric_names_parser(expr, expected):
    assert metric_names(expr) == expected


@pytest.fixture(scope="module")
def provisioning(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The grafana role's provisioning templates rendered by Ansible (inventory with a monitoring host)."""
    out = tmp_path_factory.mktemp("grafana")
    inventory = out / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {"localhost": {}},
                    "children": {
                        "monitoring": {"hosts": {"mon1": {"vllm_fleet_internal_address": "10.0.0.9"}}}
                    },
                }
            }
        )
    )
    playbook = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    result = subprocess.run(
        [playbook, "-i", str(inventory), "-l", "localhost", str(ROOT / "tests" / "grafana" / "render.yml"),
         "-e", f"render_out={out}"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return {name: yaml.safe_load((out / f"{name}.yml").read_text()) for name in ("datasources", "dashboards")}


def test_datasource_points_at_the_fleet_prometheus(provisioning, dashboard):
    (source,) = provisioning["datasources"]["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://10.0.0.9:9090"  # first monitoring host, its internal address
    variable = next(v for v in dashboard["templating"]["list"] if v["name"] == "datasource")
    assert variable["current"]["value"] == source["uid"]


def test_dashboard_provider_reads_the_installed_directory(provisioning):
    defaults = yaml.safe_load((ROOT / "roles" / "grafana" / "defaults" / "main.yml").read_text())
    (provider,) = provisioning["dashboards"]["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == defaults["grafana_dashboards_dir"]
