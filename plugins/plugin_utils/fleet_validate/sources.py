"""Which inventory file sets a variable for a host: so a problem names the file to edit, once."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

_EXTENSIONS = ("", ".yml", ".yaml", ".json")
# Where a variable given with -e (or by an AWX credential) comes from: it wins over every inventory file.
EXTRA_VARS = "extra vars (-e)"


class _Loader(yaml.SafeLoader):
    """Reads keys only: tags such as !vault and !unsafe become plain scalars."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _keys(path: Path) -> list[str]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a SafeLoader
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    return [str(k) for k in data] if isinstance(data, Mapping) else []


def _var_files(folder: Path, name: str) -> list[Path]:
    out = [folder / (name + ext) for ext in _EXTENSIONS if (folder / (name + ext)).is_file()]
    if (folder / name).is_dir():
        out += sorted(
            p for p in (folder / name).rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml", ".json")
        )
    return out


def _walk_yaml_inventory(
    data: Any, path: Path, found: dict[tuple[str, str], str], children: dict[str, list[str]]
) -> None:
    def group(name: str, body: Any) -> None:
        found.setdefault((name, ""), str(path))  # where the group itself is declared
        if not isinstance(body, Mapping):
            return
        for var in body.get("vars") or {}:
            found.setdefault((name, str(var)), str(path))
        for host, hvars in (body.get("hosts") or {}).items():
            for var in hvars or {}:
                found.setdefault((str(host), str(var)), str(path))
        for child, cbody in (body.get("children") or {}).items():
            children.setdefault(name, [])
            if str(child) not in children[name]:
                children[name].append(str(child))
            group(str(child), cbody)

    if isinstance(data, Mapping):
        for name, body in data.items():
            group(str(name), body)


def inventory_sources(sources: Iterable[str]) -> tuple[dict[tuple[str, str], str], dict[str, list[str]]]:
    """(group or host, variable) -> file, and group -> child groups, from YAML inventories and their
    group_vars/host_vars folders."""
    found: dict[tuple[str, str], str] = {}
    children: dict[str, list[str]] = {}
    for source in sources:
        base = Path(source)
        folder = base if base.is_dir() else base.parent
        files = (
            sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".yml", ".yaml"))
            if base.is_dir()
            else [base]
        )
        for path in files:
            try:
                data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a SafeLoader
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                continue
            _walk_yaml_inventory(data, path, found, children)
        for kind in ("group_vars", "host_vars"):
            vars_dir = folder / kind
            if not vars_dir.is_dir():
                continue
            names = {p.name.split(".", 1)[0] if p.is_file() else p.name for p in vars_dir.iterdir()}
            for name in sorted(names):
                for path in _var_files(vars_dir, name):
                    for var in _keys(path):
                        found[(name, var)] = str(path)
    return found, children


def where_from(
    found: Mapping[tuple[str, str], str],
    host_groups: Mapping[str, Sequence[str]],
    groups: Mapping[str, Sequence[str]],
    cwd: str,
) -> dict[tuple[str, str], str]:
    """(host, variable) -> the file its value comes from: the host's own, else its most specific group's."""
    out: dict[tuple[str, str], str] = {}
    by_scope: dict[str, list[str]] = {}
    for scope, var in found:
        by_scope.setdefault(scope, []).append(var)
    for host, member_of in host_groups.items():
        scopes = [host] + sorted(member_of, key=lambda g: (g == "all", len(groups.get(g) or []), g))
        for scope in reversed(scopes):
            for var in by_scope.get(scope, []):
                out[(host, var)] = short_path(found[(scope, var)], cwd)
    return out


def short_path(path: str, cwd: str) -> str:
    rel = os.path.relpath(path, cwd)
    return path if rel.startswith("..") else rel
