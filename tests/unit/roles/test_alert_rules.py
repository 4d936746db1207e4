"""The monitoring role's Prometheus alert rules, checked and unit-tested with promtool.

The rules template is rendered with the role's defaults by Ansible itself
(tests/prometheus/render.yml), then:
* ``promtool check rules`` must accept it;
* ``promtool test rules`` runs every tests/prometheus/*.test.yml against it;
* every alert must have at least one test where it fires and one where it does not;
* every alert tells the operator what is wrong and what to do (summary, description, severity).

promtool comes from Debian's ``prometheus`` package; when it is missing and apt is
usable (root), the fixture installs it, as CI does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
TEST_DIR = ROOT / "tests" / "prometheus"
RULES_NAME = "vllm-fleet.rules.yml"
SEVERITIES = {"critical", "warning", "info"}


def _install_promtool() -> str | None:
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        subprocess.run(cmd, env=env, capture_output=True)
    return shutil.which("promtool")


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool") or _install_promtool()
    if path is None:
        pytest.skip(
            "promtool not found and apt-get is unavailable (or not root): "
            "install Debian's 'prometheus' package to run the alert-rule tests"
        )
    return path


@pytest.fixture(scope="session")
def rules_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rules template rendered by Ansible with the role defaults, next to copies of the tests."""
    out = tmp_path_factory.mktemp("prometheus")
    playbook = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    result = subprocess.run(
        [playbook, "-i", "localhost,", str(TEST_DIR / "render.yml"), "-e", f"render_out={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for test_file in TEST_DIR.glob("*.test.yml"):
        shutil.copy(test_file, out / test_file.name)
    return out


@pytest.fixture(scope="session")
def alert_rules(rules_dir: Path) -> dict[str, dict]:
    data = yaml.safe_load((rules_dir / RULES_NAME).read_text())
    rules = [rule for group in data["groups"] for rule in group["rules"] if "alert" in rule]
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), f"duplicate alert names: {names}"
    return {rule["alert"]: rule for rule in rules}


def _test_files() -> list[Path]:
    return sorted(TEST_DIR.glob("*.test.yml"))


def test_there_are_test_files():
    assert _test_files(), f"no promtool tests in {TEST_DIR}"


def test_promtool_check_rules(promtool: str, rules_dir: Path):
    result = subprocess.run(
        [promtool, "check", "rules", RULES_NAME], cwd=rules_dir, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("test_file", _test_files(), ids=lambda p: p.name)
def test_promtool_unit_tests(promtool: str, rules_dir: Path, test_file: Path):
    result = subprocess.run(
        [promtool, "test", "rules", test_file.name], cwd=rules_dir, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _alert_cases() -> list[tuple[str, bool]]:
    """(alertname, fires) for every alert_rule_test case of every test file."""
    cases = []
    for test_file in _test_files():
        data = yaml.safe_load(test_file.read_text())
        assert data["rule_files"] == [RULES_NAME], f"{test_file.name} must test {RULES_NAME}"
        for test in data["tests"]:
            for case in test.get("alert_rule_test") or []:
                cases.append((case["alertname"], bool(case.get("exp_alerts"))))
    return cases


def test_every_alert_is_tested_firing_and_not_firing(alert_rules: dict[str, dict]):
    cases = _alert_cases()
    missing = [
        f"{name}: no test where it {'fires' if fires else 'stays silent'}"
        for name in sorted(alert_rules)
        for fires in (True, False)
        if (name, fires) not in cases
    ]
    unknown = sorted({name for name, _ in cases} - set(alert_rules))
    assert not missing, "\n".join(missing)
    assert not unknown, f"tests name alerts that do not exist: {unknown}"


def test_every_alert_tells_the_operator_what_to_do(alert_rules: dict[str, dict]):
    problems = []
    for name, rule in sorted(alert_rules.items()):
        annotations = rule.get("annotations") or {}
        if len(annotations.get("summary", "")) < 20:
            problems.append(f"{name}: summary missing or too short")
        if len(annotations.get("description", "")) < 60:
            problems.append(f"{name}: description missing or too short to say what to do")
        if "$labels.host" not in annotations.get("summary", "") + annotations.get("description", ""):
            problems.append(f"{name}: does not name the host")
        if (rule.get("labels") or {}).get("severity") not in SEVERITIES:
            problems.append(f"{name}: severity label must be one of {sorted(SEVERITIES)}")
    assert not problems, "\n".join(problems)


def test_kv_cache_alert_reads_both_metric_names(alert_rules: dict[str, dict]):
    expr = alert_rules["VllmKvCacheNearlyFull"]["expr"]
    assert "vllm:kv_cache_usage_perc" in expr and "vllm:gpu_cache_usage_perc" in expr


def test_rendered_thresholds_come_from_variables(tmp_path: Path, promtool: str):
    """Overriding a role variable changes the rendered rule (the template is not hard-coded)."""
    playbook = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    result = subprocess.run(
        [
            playbook, "-i", "localhost,", str(TEST_DIR / "render.yml"),
            "-e", f"render_out={tmp_path}",
            "-e", "monitoring_alert_target_down_for=20s",
            "-e", "monitoring_alert_kv_cache_usage_ratio=0.9",
        ],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rules = yaml.safe_load((tmp_path / RULES_NAME).read_text())
    by_name = {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert by_name["VllmTargetDown"]["for"] == "20s"
    assert by_name["ExporterTargetDown"]["for"] == "20s"
    assert re.search(r">\s*0\.9\b", by_name["VllmKvCacheNearlyFull"]["expr"])
    check = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / RULES_NAME)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
