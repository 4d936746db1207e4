"""Every role variable has one default, in its own role: no other role or playbook restates it.

A read of another role's variable with ``| default(<value>)`` (``vllm_server_docker_socket |
default('/var/run/docker.sock')``) keeps a second copy of that role's default that silently drifts when the
role changes it. Readers use ``hostvars[host] | vllm_fleet.vllm_fleet.vllm_fleet_var(name)`` (the owner's
default, plugins/plugin_utils/fleet_validate/values.py), or the fleet-wide value of roles/vllm_fleet.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_validate import load_catalogue
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_validate.values import (
    role_default,
    role_value,
)

ROOT = Path(__file__).resolve().parents[5]
CAT = load_catalogue()
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
# name | default(   and   name'] | default(   (hostvars[h]['name'] | default(...))
_READ = re.compile(r"""\b([a-z][a-z0-9_]*)(?:'\])?\s*\|\s*default\(""")


def owner(name: str) -> str | None:
    """The role whose prefix ``name`` carries (the longest role name wins: fleet_doctor over fleet)."""
    for role in sorted(ROLES, key=len, reverse=True):
        if name.startswith(role + "_"):
            return role
    return None


def cross_role_defaults(root: Path = ROOT) -> list[str]:
    """``file:line: name`` of each ``| default(`` applied to a variable another role defines."""
    found = []
    files = [(p, None) for p in sorted((root / "playbooks").glob("*.yml"))]
    for role in ROLES:
        paths = sorted((root / "roles" / role).rglob("*"))
        files += [(p, role) for p in paths if p.suffix in (".yml", ".j2")]
    for path, reader in files:
        text = path.read_text(encoding="utf-8")
        for match in _READ.finditer(text):
            name = match.group(1)
            role = owner(name)
            if role is None or role == reader or name not in CAT.defaults:
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(root)}:{line}: {name}")
    return found


def test_no_role_or_playbook_restates_another_roles_default():
    assert cross_role_defaults() == []


def test_the_check_finds_a_restated_default(tmp_path):
    (tmp_path / "playbooks").mkdir()
    tasks = tmp_path / "roles" / "fleet_rollout" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "gate.yml").write_text("h: \"{{ vllm_server_docker_socket | default('/x') }}\"\n")
    (tasks / "own.yml").write_text('x: "{{ fleet_rollout_soak_seconds | default(0) }}"\n')
    global ROLES
    saved, ROLES = ROLES, ["fleet_rollout", "vllm_server"]
    try:
        found = cross_role_defaults(tmp_path)
        assert found == ["roles/fleet_rollout/tasks/gate.yml:1: vllm_server_docker_socket"]
    finally:
        ROLES = saved


def test_a_role_value_is_the_hosts_else_its_roles_default():
    assert role_value({}, "gateway_http_port") == role_default("gateway_http_port") == 80
    assert role_value({"gateway_http_port": 8080}, "gateway_http_port") == 8080
    assert role_value({}, "vllm_server_models") == []


def test_a_default_naming_a_fleet_value_follows_it():
    fleet_image = role_default("vllm_fleet_vllm_image")
    assert role_default("vllm_server_image") == "{{ vllm_fleet_vllm_image }}"
    assert role_value({}, "vllm_server_image") == fleet_image
    assert role_value({"vllm_fleet_vllm_image": "local/vllm:1"}, "vllm_server_image") == "local/vllm:1"
    group = {"vllm_server_image": "g/vllm:2", "vllm_fleet_vllm_image": "x"}
    assert role_value(group, "vllm_server_image") == "g/vllm:2"
    assert role_value({}, "vllm_server_docker_socket") == role_default("vllm_fleet_docker_socket")


def test_unknown_names_and_other_templates_are_refused():
    with pytest.raises(ValueError, match="not a variable any role"):
        role_value({}, "vllm_server_no_such_thing")
    with pytest.raises(ValueError, match="is a template, not one variable"):
        role_value({}, "fleet_doctor_report_dir")


def test_validate_reads_a_role_default_through_the_fleet_value_it_names():
    # model_weights_root defaults to vllm_fleet_models_root: validate judges the fleet's value in its place
    from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_validate.cross import (
        HostView,
        check_weights,
    )

    assert HostView("h", {}, CAT).get("model_weights_root") == role_default("vllm_fleet_models_root")
    found = check_weights(HostView("h", {"vllm_fleet_models_root": "models"}, CAT))
    assert [(p.variable, p.what) for p in found] == [
        ("model_weights_root", "'models' is not an absolute path")
    ]
