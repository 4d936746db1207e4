"""Rollout plans: which hosts go in which batch, group by group, canary first."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class RolloutError(ValueError):
    """Invalid rollout input; the message names the variable to fix."""


def batch_sizes(serial: Any, count: int, var: str = "fleet_rollout_serial") -> list[int]:
    """Absolute batch sizes for ``count`` hosts, the way Ansible reads a play's ``serial`` list.

    Each item is a host count or a percentage (``"25%"``) of ``count``; a percentage below one
    host is one host; ``0`` or ``"100%"`` takes every remaining host; after the last item, the
    last item repeats. The sizes add up to ``count``.
    """
    items = serial if isinstance(serial, list | tuple) else [serial]
    if not items:
        raise RolloutError(f"{var} is empty: give a list of batch sizes, e.g. [1, '25%', '100%']")
    sizes: list[int] = []
    for item in items:
        text = str(item).strip()
        try:
            if isinstance(item, bool):
                raise ValueError
            if text.endswith("%"):
                pct = float(text[:-1])
                if not 0 < pct <= 100:
                    raise ValueError
                sizes.append(int(pct / 100.0 * count) or 1)
            else:
                size = int(text)
                if size < 0:
                    raise ValueError
                sizes.append(size if size > 0 else count)
        except ValueError:
            raise RolloutError(
                f"{var} item {item!r} is not a host count (1, 2, ...) or a percentage ('25%', '100%')"
            ) from None
    out: list[int] = []
    left = count
    index = 0
    while left > 0:
        size = min(sizes[min(index, len(sizes) - 1)], left)
        out.append(size)
        left -= size
        index += 1
    return out


def default_group(host_groups: Iterable[str], groups: Mapping[str, Iterable[str]], gpu_group: str) -> str:
    """The rollout group of a host: its smallest inventory group made only of GPU hosts.

    ``host_groups`` is the host's ``group_names``, ``groups`` Ansible's ``groups``. A group such
    as ``h100_nodes`` (a child of ``gpu_nodes``) wins over ``gpu_nodes`` itself; ties go to the
    name that sorts first. A host in no such group is in ``gpu_group``.
    """
    gpu_hosts = set(groups.get(gpu_group) or [])
    candidates = []
    for name in host_groups:
        if name in (gpu_group, "all", "ungrouped"):
            continue
        members = set(groups.get(name) or [])
        if members and members <= gpu_hosts:
            candidates.append((len(members), name))
    return min(candidates)[1] if candidates else gpu_group


def rollout_plan(
    members: Iterable[Mapping[str, Any]],
    group_order: Iterable[str] | None = None,
    models_by_host: Mapping[str, Any] | None = None,
    min_available: int = 1,
    allow_downtime: bool = False,
) -> dict[str, Any]:
    """Order hosts group by group and cut each group into its own batches.

    ``members``: ``[{host, group, serial}]`` in play order (``serial`` is the group's
    ``fleet_rollout_serial`` as seen by that host; the first host of a group decides). A member
    of a serving group also has ``unit`` (the serving group) and ``leader`` (rank 0): the hosts
    of one replica are one unit, never split over batches, and ``serial`` counts units.
    ``group_order``: groups to roll first, in that order; the others follow in play order.
    ``models_by_host``: inventory name -> its ``vllm_server_models`` for every serving host
    (not only the selected ones), to find batches that would leave a model with fewer than
    ``min_available`` hosts in service.

    Returns ``order`` (the hosts, for the play's ``hosts``), ``batches`` (absolute sizes, for
    ``serial``), ``groups`` (``[{group, hosts, batches}]``), ``canaries`` (the first batch of
    each group), ``label`` (host -> "group batch i/n"), ``next_index`` (host -> index in
    ``order`` of the first host after its batch: ``order[next_index[host]:]`` are the hosts
    a failure in its batch leaves untouched), ``units`` (host -> the hosts replaced, gated and
    restored with it: its serving group, rank 0 first, or itself), ``followers`` (hosts of a
    serving group other than rank 0: no gateway routes to them) and ``problems`` (capacity
    problems, empty when the plan is safe or downtime is accepted).
    """
    by_group: dict[str, list[str]] = {}
    serial_of: dict[str, Any] = {}
    seen: set[str] = set()
    unit_of: dict[str, str] = {}
    followers: set[str] = set()
    leaders: set[str] = set()
    for index, member in enumerate(members):
        if not isinstance(member, Mapping) or not member.get("host"):
            raise RolloutError(f"rollout member {index} must be a mapping with host, group and serial")
        host = str(member["host"])
        if host in seen:
            continue
        seen.add(host)
        group = str(member.get("group") or "")
        if not group:
            raise RolloutError(f"{host}: fleet_rollout_group is empty; name the host's rollout group")
        by_group.setdefault(group, []).append(host)
        serial_of.setdefault(group, member.get("serial", [1, "25%", "100%"]))
        if member.get("unit"):
            unit_of[host] = str(member["unit"])
            (leaders if member.get("leader") else followers).add(host)
    _check_units(unit_of, by_group)
    wanted = [str(g) for g in (group_order or [])]
    unknown = [g for g in wanted if g not in by_group]
    ordered = [g for g in wanted if g in by_group] + [g for g in by_group if g not in wanted]
    groups: list[dict[str, Any]] = []
    order: list[str] = []
    batches: list[int] = []
    canaries: list[str] = []
    label: dict[str, str] = {}
    next_index: dict[str, int] = {}
    for group in ordered:
        hosts = by_group[group]
        units = _units(hosts, unit_of)
        counts = batch_sizes(serial_of[group], len(units), f"fleet_rollout_serial of {group}")
        cut: list[list[str]] = []
        start = 0
        for count in counts:
            cut.append([h for unit in units[start : start + count] for h in unit])
            start += count
        sizes = [len(batch) for batch in cut]
        end = len(order)
        for number, batch in enumerate(cut, 1):
            end += len(batch)
            for host in batch:
                label[host] = f"{group} batch {number}/{len(cut)}"
                next_index[host] = end
        groups.append({"group": group, "hosts": hosts, "batches": cut})
        order.extend(hosts)
        batches.extend(sizes)
        canaries.extend(cut[0])
    # a replica is served through its rank 0: followers are no serving hosts of their own
    serving_hosts = {h: m for h, m in (models_by_host or {}).items() if h not in followers}
    problems = [] if allow_downtime else capacity_problems(groups, serving_hosts, min_available)
    return {
        "order": order,
        "batches": batches,
        "groups": groups,
        "canaries": canaries,
        "label": label,
        "next_index": next_index,
        "units": rollout_units(order, unit_of, leaders),
        "followers": [h for h in order if h in followers],
        "problems": problems,
        "unknown_groups": unknown,
    }


def _units(hosts: list[str], unit_of: Mapping[str, str]) -> list[list[str]]:
    """The hosts cut into what is replaced together: a serving group's members, or one host."""
    units: list[list[str]] = []
    index: dict[str, int] = {}
    for host in hosts:
        unit = unit_of.get(host)
        if unit is None:
            units.append([host])
        elif unit in index:
            units[index[unit]].append(host)
        else:
            index[unit] = len(units)
            units.append([host])
    return units


def rollout_units(
    hosts: Iterable[str], unit_of: Mapping[str, str], leaders: Iterable[str]
) -> dict[str, list[str]]:
    """Host -> the hosts of its unit: a serving group's members with rank 0 first, else the host alone."""
    hosts = list(hosts)
    lead = set(leaders)
    members: dict[str, list[str]] = {}
    for host in hosts:
        if host in unit_of:
            members.setdefault(unit_of[host], []).append(host)
    out: dict[str, list[str]] = {}
    for host in hosts:
        unit = members[unit_of[host]] if host in unit_of else [host]
        out[host] = sorted(unit, key=lambda h: h not in lead)  # stable: rank 0, then the others as given
    return out


def _check_units(unit_of: Mapping[str, str], by_group: Mapping[str, list[str]]) -> None:
    where: dict[str, str] = {}
    for group, hosts in by_group.items():
        for host in hosts:
            unit = unit_of.get(host)
            if unit is None:
                continue
            if where.setdefault(unit, group) != group:
                raise RolloutError(
                    f"serving group {unit} spans rollout groups {where[unit]} and {group}: its hosts are "
                    f"replaced together; give them one fleet_rollout_group"
                )


def _model_names(models: Any) -> list[str]:
    if not isinstance(models, list | tuple):
        return []
    return sorted({str(m.get("name")) for m in models if isinstance(m, Mapping) and m.get("name")})


def capacity_problems(
    groups: Iterable[Mapping[str, Any]], models_by_host: Mapping[str, Any], min_available: int
) -> list[str]:
    """Batches that would leave a model with fewer than ``min_available`` serving hosts.

    Only the batch being replaced is out of service (earlier batches are back in service).
    """
    serving: dict[str, set[str]] = {}
    for host, models in models_by_host.items():
        for name in _model_names(models):
            serving.setdefault(name, set()).add(str(host))
    problems: list[str] = []
    for group in groups:
        cut = group.get("batches") or []
        for number, batch in enumerate(cut, 1):
            out = set(batch)
            models = sorted({m for host in batch for m in _model_names(models_by_host.get(host))})
            for model in models:
                left = len(serving.get(model, set()) - out)
                if left < int(min_available):
                    taken = sorted(serving.get(model, set()) & out)
                    if len(serving.get(model, set())) <= 1:
                        why = f"{model} is served by {', '.join(taken)} only: replacing it means downtime"
                    else:
                        why = (
                            f"batch {number}/{len(cut)} of {group.get('group')} ({', '.join(batch)}) takes "
                            f"{len(taken)} of the {len(serving[model])} hosts serving {model} out of service "
                            f"at once, leaving {left}"
                        )
                    problems.append(f"{why} (fleet_rollout_min_available: {int(min_available)})")
    return problems
