"""The inventory's YAML files that do not parse, each named with its line (PyYAML and the stdlib only).

Ansible reads group_vars/all before the first task of any play and, when a file there does not parse (an
undefined alias), stops with "YAML parsing failed" and no file name. playbooks/validate.yml runs this as a
script while it templates its hosts pattern, before those variables are read:
``python3 yaml_files.py SOURCE...`` prints one line per problem (nothing when every file parses).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import yaml

_VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


class _Loader(yaml.SafeLoader):
    """Tags such as !vault and !unsafe are Ansible's: any tag is a plain value here."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _files(source: Path) -> list[Path]:
    """The YAML inventory files of a source and every group_vars/host_vars file beside it."""
    folder = source if source.is_dir() else source.parent
    if source.is_dir():
        found = sorted(p for p in source.iterdir() if p.is_file() and p.suffix in (".yml", ".yaml"))
    else:
        found = [source] if source.suffix in (".yml", ".yaml") else []  # an INI inventory is not YAML
    for kind in ("group_vars", "host_vars"):
        base = folder / kind
        if base.is_dir():
            found += sorted(
                p
                for p in base.rglob("*")
                if p.is_file() and p.suffix in _VARS_SUFFIXES and not p.name.startswith(".")
            )
    return found


def _problem(path: Path, exc: Exception, cwd: str) -> str:
    rel = os.path.relpath(path, cwd)
    where = path if rel.startswith("..") else rel
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = " ".join(str(getattr(exc, "problem", None) or exc).split())
    if "undefined alias" in what:
        fix = (
            "define the anchor (&name) above the alias in the same file (anchors do not reach across "
            "files), or write the value out"
        )
    else:
        fix = "correct the YAML there (quote a value holding ': ', '{{' or a leading '*', '&', '!')"
    return f"{where}: YAML parsing failed{at}: {what}. Fix: {fix}"


def yaml_problems(sources: Iterable[str], cwd: str = ".") -> list[str]:
    """One line per inventory file that does not parse, naming the file, the line and the fix."""
    problems: list[str] = []
    seen: set[Path] = set()
    for source in sources:
        for path in _files(Path(source)):
            if path in seen:
                continue
            seen.add(path)
            try:
                text = path.read_text(encoding="utf-8")
                if path.suffix == ".json":
                    json.loads(text)
                else:
                    yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
            except (yaml.YAMLError, ValueError) as exc:
                problems.append(_problem(path, exc, cwd))
            except OSError:
                continue  # unreadable here: Ansible names it itself
    return problems


if __name__ == "__main__":
    print("\n".join(yaml_problems(sys.argv[1:], os.getcwd())))
