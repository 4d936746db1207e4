#!/usr/bin/env python3
"""Check that every role's meta/argument_specs.yml and defaults/main.yml declare the same variables.

Ansible takes defaults from defaults/main.yml and only documents/validates them in
argument_specs, so the two drift silently; this check makes the drift a test failure.
Usage: check_argument_specs.py ROLES_DIR   (exit 1 and one line per problem)
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


def spec_options(role: Path) -> tuple[set[str], set[str]]:
    """Return (all options, required options) over every entry point of the role."""
    spec_file = role / "meta" / "argument_specs.yml"
    data = yaml.safe_load(spec_file.read_text()) or {}
    options: set[str] = set()
    required: set[str] = set()
    for entry in (data.get("argument_specs") or {}).values():
        for name, opt in ((entry or {}).get("options") or {}).items():
            options.add(name)
            if (opt or {}).get("required"):
                required.add(name)
    return options, required


def default_keys(role: Path) -> set[str]:
    path = role / "defaults" / "main.yml"
    if not path.exists():
        return set()
    return set((yaml.safe_load(path.read_text()) or {}).keys())


def check_role(role: Path) -> list[str]:
    name = role.name
    if not (role / "meta" / "argument_specs.yml").exists():
        return [f"{name}: meta/argument_specs.yml is missing (every role documents its inputs)"]
    options, required = spec_options(role)
    defaults = default_keys(role)
    problems = []
    for key in sorted(defaults - options):
        problems.append(f"{name}: '{key}' is in defaults/main.yml but not in meta/argument_specs.yml")
    for key in sorted(options - defaults - required):
        problems.append(
            f"{name}: '{key}' is in meta/argument_specs.yml but has no default; "
            "add it to defaults/main.yml or mark it required: true"
        )
    for key in sorted(required & defaults):
        problems.append(f"{name}: '{key}' is required in argument_specs but also has a default")
    for key in sorted(defaults | options):
        if not key.startswith(name + "_"):
            problems.append(f"{name}: variable '{key}' is not prefixed with the role name '{name}_'")
    return problems


def main(argv: list[str]) -> int:
    roles_dir = Path(argv[1] if len(argv) > 1 else "roles")
    roles = sorted(p for p in roles_dir.iterdir() if p.is_dir())
    problems = [p for role in roles for p in check_role(role)]
    for line in problems:
        print(line)
    print(f"argument_specs parity: {len(roles)} roles, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
