"""Variables in the fleet's namespace that no role reads: a typo, or a name the fleet dropped."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from .problems import Problem
from .specs import REMOVED, Catalogue


def closest(name: str, candidates: Iterable[str], cutoff: float = 0.75) -> str | None:
    found = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=cutoff)
    return found[0] if found else None


# what a name problem says first: its fix is about the name, wherever the value came from
UNKNOWN = "is not a variable of any vllm-fleet role"
WAS_REMOVED = "was removed"


def check_names(host: str, names: Iterable[str], cat: Catalogue) -> list[Problem]:
    problems = []
    for name in sorted(names):
        if name in REMOVED:
            problems.append(
                Problem(
                    name,
                    f"{WAS_REMOVED}; the fleet's one backend key is {REMOVED[name]}",
                    f"rename {name} to {REMOVED[name]} (group_vars/all, from Vault)",
                    host,
                )
            )
        elif cat.governs(name) and name not in cat.known:
            guess = closest(name, cat.known)
            what = UNKNOWN + (f"; did you mean {guess}?" if guess else "")
            fix = (
                f"rename it to {guess}"
                if guess
                else "remove it, or use a variable listed in roles/*/meta/argument_specs.yml"
            )
            problems.append(Problem(name, what, fix, host))
    return problems
