"""One problem of the inventory, and how a list of them is told to the user (one line each)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unresolved:
    """A value that cannot be judged on the control node: a vault secret without its password, a lookup of a
    file the deployment writes later, a reference to a variable that is not defined (``undefined``), or a
    template that can never render (``error``: a misspelt filter, a syntax error)."""

    reason: str
    undefined: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Problem:
    """``variable`` (a path such as ``vllm_server_models[0].port``) is wrong on ``host``; ``fix`` mends it."""

    variable: str
    what: str
    fix: str
    host: str = ""

    def line(self, where: str) -> str:
        stop = "" if self.what.endswith(("?", ".")) else "."
        return f"{where}: {self.variable}: {self.what}{stop} Fix: {self.fix}"


def is_unresolved(value: Any) -> bool:
    return isinstance(value, Unresolved)


def has_unresolved(value: Any) -> bool:
    if isinstance(value, Unresolved):
        return True
    if isinstance(value, Mapping):
        return any(has_unresolved(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_unresolved(v) for v in value)
    return False


def format_problems(
    problems: Iterable[Problem],
    where: Mapping[tuple[str, str], str],
    groups: Mapping[str, Sequence[str]],
) -> list[str]:
    """One line per problem; the same problem on several hosts is told once, at the file that defines it.

    ``where`` maps (host, top-level variable) to the inventory file the host's value comes from, and
    ("", group) to the file that declares a group (for problems of the inventory's groups).
    """
    seen: dict[str, list[str]] = {}
    order: list[str] = []
    for problem in problems:
        top = problem.variable.split("[", 1)[0].split(".", 1)[0]
        source = where.get((problem.host, top), "")
        key = f"{source}\0{problem.variable}\0{problem.what}\0{problem.fix}"
        if key not in seen:
            seen[key] = []
            order.append(key)
        if problem.host and problem.host not in seen[key]:
            seen[key].append(problem.host)
    lines = []
    for key in order:
        source, variable, what, fix = key.split("\0")
        hosts = seen[key]
        if source:
            label = source
        elif hosts:
            label = _hosts_label(hosts, groups)
        else:
            label = "inventory"
        lines.append(Problem(variable, what, fix).line(label))
    return lines


def _hosts_label(hosts: Sequence[str], groups: Mapping[str, Sequence[str]]) -> str:
    for name, members in sorted(groups.items(), key=lambda item: (len(item[1]), item[0])):
        if name != "ungrouped" and members and set(members) == set(hosts):
            return f"group {name}" if name != "all" else "all hosts"
    return "host " + ", ".join(hosts) if len(hosts) == 1 else "hosts " + ", ".join(sorted(hosts))
