"""The argument_specs parity check finds drift between defaults and specs."""

from pathlib import Path

import pytest
import yaml
from check_argument_specs import check_role


def make_role(tmp_path: Path, name: str, defaults: dict, options: dict) -> Path:
    role = tmp_path / name
    (role / "defaults").mkdir(parents=True)
    (role / "meta").mkdir()
    (role / "defaults" / "main.yml").write_text(yaml.safe_dump(defaults))
    spec = {"argument_specs": {"main": {"options": options}}}
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(spec))
    return role


CASES = [
    ({"web_port": 80}, {"web_port": {"type": "int"}}, []),
    ({"web_port": 80, "web_user": "x"}, {"web_port": {"type": "int"}}, ["'web_user' is in defaults"]),
    ({}, {"web_port": {"type": "int"}}, ["'web_port' is in meta/argument_specs.yml but has no default"]),
    ({}, {"web_key": {"type": "str", "required": True}}, []),
    ({"port": 1}, {"port": {"type": "int"}}, ["not prefixed"]),
]


@pytest.mark.parametrize(("defaults", "options", "expected"), CASES)
def test_check_role(tmp_path: Path, defaults: dict, options: dict, expected: list[str]) -> None:
    problems = check_role(make_role(tmp_path, "web", defaults, options))
    assert len(problems) == len(expected)
    for fragment, problem in zip(expected, problems, strict=True):
        assert fragment in problem


def test_missing_spec_file(tmp_path: Path) -> None:
    (tmp_path / "web" / "defaults").mkdir(parents=True)
    assert "argument_specs.yml is missing" in check_role(tmp_path / "web")[0]


def test_repository_roles_are_in_parity() -> None:
    roles = Path(__file__).resolve().parents[3] / "roles"
    problems = [p for role in sorted(roles.iterdir()) if role.is_dir() for p in check_role(role)]
    assert problems == []
