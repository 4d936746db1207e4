"""The whole inventory checked: each host's variables against the catalogue, then the checks across
hosts and roles (``check_inventory``), told as one line per problem (``validate_inventory``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .argspec import check_option
from .cross import (
    HostView,
    check_affinity_models,
    check_backend_key,
    check_gateway,
    check_groups,
    check_image_version,
    check_ports,
    check_served,
    check_weights,
    served_names,
)
from .gpus import check_gpu_groups, host_gpus
from .mig import check_mig
from .models import Reader, check_models, read_local
from .names import UNKNOWN, WAS_REMOVED, check_names
from .plans import check_plans
from .problems import Problem, Unresolved, format_problems
from .serving_groups import check_serving_groups
from .sources import EXTRA_VARS, inventory_sources, short_path, where_from
from .specs import Catalogue, load_catalogue


def check_inventory(
    hosts: Mapping[str, Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    children: Mapping[str, Sequence[str]] | None = None,
    cat: Catalogue | None = None,
    gpu_facts: Mapping[str, Any] | None = None,
    config_dir: str = ".",
    read: Reader = read_local,
) -> tuple[list[Problem], int]:
    """Every problem of the inventory, and how many (GPU group, model) plans were made.

    ``hosts``: each host's variables (``Unresolved`` where a value cannot be judged here);
    ``groups``: group -> hosts (Ansible's ``groups``); ``children``: group -> child groups;
    ``gpu_facts``: host -> cached ``nvidia_gpu`` facts; ``config_dir``: base of relative config paths;
    ``read``: a file of the control node (an adapter's adapter_config.json), None where it is not here."""
    cat = cat or load_catalogue()
    children = children or {}
    problems: list[Problem] = []
    host_groups = {host: [g for g, members in groups.items() if host in members] for host in hosts}
    gpus = {host: host_gpus(values, (gpu_facts or {}).get(host)) for host, values in hosts.items()}
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
            problems += check_models(view, gpus[host], read)
        problems += check_ports(view, member_of)
    first = next(iter(sorted(hosts)), "")
    some = HostView(first, hosts.get(first, {}), cat)
    problems += check_groups(groups, children, some.get("fleet_plan_models", []), first)
    views = {host: HostView(host, values, cat) for host, values in hosts.items()}
    problems += _check_affinity_models(views, groups, host_groups)
    serving = some.get("vllm_fleet_serving_groups", [])
    serving_found = check_serving_groups(serving, groups, views, gpu_facts or {}, first)
    problems += serving_found
    names = [e if isinstance(e, str) else e.get("group") for e in _entries_or_names(serving)]
    serving_names = [n for n in names if isinstance(n, str)]
    # a serving group whose members all have cached facts is compared by check_serving_groups
    judged = [g for g in serving_names if groups.get(g) and all((gpu_facts or {}).get(h) for h in groups[g])]
    problems += check_gpu_groups(
        groups, children, serving_names, gpus, judged, one_group_each=not serving_found
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


def _entries_or_names(value: Any) -> list[Any]:
    return [e for e in value if isinstance(e, (str, Mapping))] if isinstance(value, list) else []


def _check_affinity_models(
    views: Mapping[str, HostView], groups: Mapping[str, Sequence[str]], host_groups: Mapping[str, list[str]]
) -> list[Problem]:
    problems: list[Problem] = []
    for host, view in views.items():
        if "gateways" not in host_groups[host]:
            continue
        backend = view.get("gateway_backend_group", "gpu_nodes")
        if not isinstance(backend, str) or backend not in groups:
            continue  # check_gateway tells an unknown backend group
        members = [views[h] for h in groups[backend] if h in views]
        problems += check_affinity_models(view, served_names(members), backend)
    return problems


# told with their own fix (from Vault) by check_backend_key and check_gateway
_KEYS = ("vllm_fleet_api_key", "gateway_client_keys")


def _undefined_references(host: str, path: str, value: Any) -> list[Problem]:
    """Each value (at any depth) that refers to a variable the inventory does not define, or whose template
    can never render (a misspelt filter): it would pass here and break on the hosts."""
    if isinstance(value, Unresolved):
        if value.error:
            return [
                Problem(
                    path,
                    f"its template cannot be rendered: {value.error}",
                    f"correct the template of {path} (ansible-doc -t filter -l lists the filters), "
                    "or set the value directly",
                    host,
                )
            ]
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
    extra_vars: Collection[str] = (),
    read: Reader = read_local,
) -> tuple[list[str], int]:
    """One line per problem, naming the inventory file (or group/host, or the extra vars), the variable,
    what is wrong and the fix; and how many (GPU group, model) plans were made (see ``check_plans``).

    ``extra_vars``: the names given as extra vars (-e, an AWX credential); they win over every file."""
    found, children = inventory_sources(sources)
    problems, planned = check_inventory(hosts, groups, children, cat, gpu_facts, config_dir, read)
    host_groups = {host: [g for g, members in groups.items() if host in members] + ["all"] for host in hosts}
    where = where_from(found, host_groups, groups, cwd)
    where.update({("", scope): short_path(path, cwd) for (scope, var), path in found.items() if var == ""})
    where.update({(host, var): EXTRA_VARS for host in [*hosts, ""] for var in extra_vars})
    problems = [
        _from_extra_vars(p) if where.get((p.host, _top(p.variable))) == EXTRA_VARS else p for p in problems
    ]
    return format_problems(problems, where, groups), planned


def _top(variable: str) -> str:
    return variable.split("[", 1)[0].split(".", 1)[0]


def _from_extra_vars(problem: Problem) -> Problem:
    """Editing an inventory file would not help: the extra vars win over it."""
    where = "in the extra vars (-e, or the AWX credential giving it)"
    if problem.what.startswith((UNKNOWN, WAS_REMOVED)):
        return Problem(problem.variable, problem.what, f"{problem.fix} {where}", problem.host)
    fix = f"pass a valid {_top(problem.variable)} {where}"
    return Problem(problem.variable, problem.what, f"{fix}; {problem.fix}", problem.host)
