"""The whole inventory checked on the control node before any host is touched (playbooks/validate.yml).

- ``specs``: every role's argument_specs and every variable name the collection reads (``load_catalogue``)
- ``names``: unknown and removed variables, with the closest known name (``check_names``)
- ``argspec``: types, choices, required and unknown sub-options, as Ansible validates them (``check_option``)
- ``cross``: across roles: served models fetched, keys and tiers, hubs and revisions, groups, ports
- ``serving_groups``: the hosts that serve one replica together agree (models, GPUs, rendezvous address)
- ``mig``: models served on MIG instances: the selection, tensor parallelism 1, the ports they take
- ``plans``: the plan of each fleet_plan_models entry that the control node can make alone (``check_plans``)
- ``sources``: which inventory file sets a variable, so each problem names the file to edit once
- ``problems``: ``Problem``, ``Unresolved`` and the one-line report (``format_problems``)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .argspec import check_option
from .cross import (
    HostView,
    check_backend_key,
    check_gateway,
    check_groups,
    check_image_version,
    check_ports,
    check_served,
    check_weights,
)
from .mig import check_mig
from .names import check_names, closest
from .plans import check_plans
from .problems import Problem, Unresolved, format_problems, has_unresolved, is_unresolved
from .serving_groups import check_serving_groups
from .sources import inventory_sources, short_path, where_from
from .specs import REMOVED, Catalogue, load_catalogue

__all__ = [
    "REMOVED",
    "Catalogue",
    "Problem",
    "Unresolved",
    "check_inventory",
    "check_plans",
    "closest",
    "format_problems",
    "has_unresolved",
    "inventory_sources",
    "is_unresolved",
    "load_catalogue",
    "validate_inventory",
    "where_from",
]


def check_inventory(
    hosts: Mapping[str, Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    children: Mapping[str, Sequence[str]] | None = None,
    cat: Catalogue | None = None,
    gpu_facts: Mapping[str, Any] | None = None,
    config_dir: str = ".",
) -> tuple[list[Problem], int]:
    """Every problem of the inventory, and how many (GPU group, model) plans were made.

    ``hosts``: each host's variables (``Unresolved`` where a value cannot be judged here);
    ``groups``: group -> hosts (Ansible's ``groups``); ``children``: group -> child groups;
    ``gpu_facts``: host -> cached ``nvidia_gpu`` facts; ``config_dir``: base of relative config paths."""
    cat = cat or load_catalogue()
    children = children or {}
    problems: list[Problem] = []
    host_groups = {host: [g for g, members in groups.items() if host in members] for host in hosts}
    for host, values in hosts.items():
        problems += check_names(host, values, cat)
        for name, value in values.items():
            if cat.governs(name):
                problems += _undefined_references(host, name, value)
            if name in cat.options:
                problems += check_option(host, name, value, cat.options[name])
        view = HostView(host, values, cat)
        member_of = host_groups[host]
        if "gpu_nodes" in member_of or "gateways" in member_of:
            problems += check_backend_key(view)
        if "gateways" in member_of:
            # a variable the argument_specs already refused is told once
            named = {p.variable for p in problems if p.host == host}
            problems += [p for p in check_gateway(view, list(groups)) if p.variable not in named]
        if member_of and set(member_of) & {"gpu_nodes", "storage"}:
            problems += check_weights(view)
        if "gpu_nodes" in member_of:
            problems += check_served(view)
            problems += check_image_version(view)
            problems += check_mig(view, (gpu_facts or {}).get(host))
        problems += check_ports(view, member_of)
    first = next(iter(sorted(hosts)), "")
    some = HostView(first, hosts.get(first, {}), cat)
    problems += check_groups(groups, children, some.get("fleet_plan_models", []), first)
    views = {host: HostView(host, values, cat) for host, values in hosts.items()}
    problems += check_serving_groups(
        some.get("vllm_fleet_serving_groups", []), groups, views, gpu_facts or {}, first
    )
    found, planned = check_plans(
        some.get("fleet_plan_models", []),
        groups,
        hosts,
        gpu_facts or {},
        config_dir,
        some.get("fleet_plan_vllm_version")
        if some.has("fleet_plan_vllm_version")
        else some.get("vllm_fleet_vllm_version"),
        first,
    )
    return problems + found, planned


# told with their own fix (from Vault) by check_backend_key and check_gateway
_KEYS = ("vllm_fleet_api_key", "gateway_client_keys")


def _undefined_references(host: str, path: str, value: Any) -> list[Problem]:
    """Each value (at any depth) that refers to a variable the inventory does not define."""
    if isinstance(value, Unresolved):
        if not value.undefined or path.split("[", 1)[0] in _KEYS:
            return []
        return [
            Problem(
                path,
                f"refers to {value.undefined}, which is not defined",
                f"define {value.undefined}, or set {path} directly",
                host,
            )
        ]
    if isinstance(value, Mapping):
        return [p for key, item in value.items() for p in _undefined_references(host, f"{path}.{key}", item)]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _undefined_references(host, f"{path}[{i}]", item)]
    return []


def validate_inventory(
    hosts: Mapping[str, Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    sources: Sequence[str] = (),
    cwd: str = ".",
    cat: Catalogue | None = None,
    gpu_facts: Mapping[str, Any] | None = None,
    config_dir: str = ".",
) -> tuple[list[str], int]:
    """One line per problem, naming the inventory file (or group/host), the variable, what is wrong and
    the fix;
    and how many (GPU group, model) plans were made (see ``check_plans``)."""
    found, children = inventory_sources(sources)
    problems, planned = check_inventory(hosts, groups, children, cat, gpu_facts, config_dir)
    host_groups = {host: [g for g, members in groups.items() if host in members] + ["all"] for host in hosts}
    where = where_from(found, host_groups, groups, cwd)
    where.update({("", scope): short_path(path, cwd) for (scope, var), path in found.items() if var == ""})
    return format_problems(problems, where, groups), planned
