"""Serving groups (``vllm_fleet_serving_groups``): hosts that serve one replica together must agree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.group import group_gpu_spec
from ..fleet_serving.groups import VAR, GroupError, serving_groups
from .cross import HostView
from .problems import Problem, has_unresolved


def _models(view: HostView) -> list[tuple[Any, Any]]:
    models = view.get("vllm_server_models", [])
    if not isinstance(models, list):
        return []
    return sorted(((m.get("name"), m.get("port")) for m in models if isinstance(m, Mapping)), key=str)


def check_serving_groups(
    spec: Any,
    groups: Mapping[str, Sequence[str]],
    views: Mapping[str, HostView],
    gpu_facts: Mapping[str, Any],
    host: str = "",
) -> list[Problem]:
    """A host in two groups, an unknown or empty group, members with other models or other GPUs than
    rank 0, a rank 0 without a fixed address for the others to meet it at."""
    if has_unresolved(spec):
        return []
    try:
        found = serving_groups(spec, groups)
    except GroupError as exc:
        return [Problem(exc.variable, exc.what, exc.fix, host)]
    problems: list[Problem] = []
    for group in found:
        lead = views.get(group.rank0)
        if lead is None:
            continue
        # the inventory's own values: the role default of the listen address reads gathered facts, and
        # followers dial rank 0 at an address that must not change with a DHCP lease
        addresses = [
            lead.values.get(n) for n in ("vllm_server_listen_address", "vllm_fleet_internal_address")
        ]
        # a value that cannot be judged here (a role default's template, a vault secret) is not judged
        if not any(has_unresolved(a) or (isinstance(a, str) and a.strip()) for a in addresses):
            problems.append(
                Problem(
                    "vllm_fleet_internal_address",
                    f"{group.rank0} is rank 0 of serving group {group.name} and has no fixed address for "
                    "its other members to meet it at (the rendezvous address)",
                    f"set vllm_fleet_internal_address (or vllm_server_listen_address) for {group.rank0}",
                    group.rank0,
                )
            )
        models = _models(lead)
        for member in group.members[1:]:
            view = views.get(member)
            if view is not None and _models(view) != models:
                problems.append(
                    Problem(
                        "vllm_server_models",
                        f"{member} serves other models than {group.rank0} (rank 0) in serving group "
                        f"{group.name}; the members of one replica serve the same models",
                        f"set vllm_server_models in the group_vars of {group.name}, not per host",
                        member,
                    )
                )
        facts = [(h, gpu_facts.get(h)) for h in group.members]
        if all(isinstance(f, Mapping) for _h, f in facts):
            try:
                group_gpu_spec(group.name, facts)  # type: ignore[arg-type]
            except PlanInputError as exc:
                what, _sep, fix = str(exc).partition(" Fix: ")
                problems.append(
                    Problem(VAR, what.rstrip("."), fix.rstrip(".") or "give every member the same GPUs", host)
                )
    return problems
