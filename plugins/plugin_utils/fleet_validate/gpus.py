"""The GPUs of a host as the control node knows them (cached nvidia_gpu facts, else the lab's
``lab_gpu_profile``), and the GPU groups: one GPU type per group, one GPU group per host."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .problems import Problem

# The lab's simulated GPUs: a capture folder of tests/data/nvidia-smi named <gpu>x<count>[-variant].
GPU_PROFILE_VAR = "lab_gpu_profile"
_PROFILE = re.compile(r"^([a-z][a-z0-9]*?)x([1-9][0-9]*)(?:-[a-z0-9-]+)?$")


@dataclass(frozen=True)
class HostGpus:
    """``kind``: the GPU model(s); ``count``: whole GPUs; ``source``: where the control node read them."""

    kind: str
    count: int
    source: str

    @property
    def text(self) -> str:
        return f"{self.count}x {self.kind} ({self.source})"


def host_gpus(values: Mapping[str, Any], facts: Any) -> HostGpus | None:
    """What the control node knows of a host's GPUs, or None (then only the hosts know)."""
    if isinstance(facts, Mapping) and facts.get("present") and isinstance(facts.get("gpus"), list):
        cards = [g for g in facts["gpus"] if isinstance(g, Mapping)]
        if cards:
            kinds = sorted({str(g.get("name") or "GPU") for g in cards})
            return HostGpus(" + ".join(kinds), len(cards), "cached GPU facts")
    profile = values.get(GPU_PROFILE_VAR)
    found = _PROFILE.match(profile) if isinstance(profile, str) else None
    if found:
        return HostGpus(found.group(1).upper(), int(found.group(2)), f"{GPU_PROFILE_VAR} {profile}")
    return None


def check_gpu_groups(
    groups: Mapping[str, Sequence[str]],
    children: Mapping[str, Sequence[str]],
    serving: Collection[str],
    gpus: Mapping[str, HostGpus | None],
    judged: Collection[str] = (),
    one_group_each: bool = True,
) -> list[Problem]:
    """A host in two GPU groups (child groups of gpu_nodes, serving groups aside), and a GPU group whose
    hosts have other GPUs: each group is planned once, on one host's GPUs, and rolled out on its own.

    ``serving``: the serving groups' names; ``judged``: groups whose GPUs another check already compared;
    ``one_group_each``: False while the serving groups are themselves wrong (which groups they are is
    unsure, so a host in a GPU group and a misnamed serving group is not told twice)."""
    problems: list[Problem] = []
    direct = [g for g in children.get("gpu_nodes") or [] if g not in serving and groups.get(g)]
    first: dict[str, str] = {}
    for group in direct:
        for host in groups[group]:
            if one_group_each and host in first and first[host] != group:
                problems.append(
                    Problem(
                        group,
                        f"{host} is also in GPU group {first[host]}: a host has one GPU type, so one GPU "
                        "group (each is planned on its own GPU facts and rolled out with its own batches)",
                        f"keep {host} in one child group of gpu_nodes (hosts serving one replica together go "
                        f"in a group named in vllm_fleet_serving_groups)",
                    )
                )
            first.setdefault(host, group)
    for group in [*direct, *(g for g in serving if g in groups)]:
        if group in judged:
            continue
        known = [(h, gpus.get(h)) for h in groups.get(group) or []]
        seen = [(h, g) for h, g in known if g is not None]
        differ = [(h, g) for h, g in seen if (g.kind, g.count) != (seen[0][1].kind, seen[0][1].count)]
        if seen and differ:
            host, other = differ[0]
            lead, mine = seen[0]
            problems.append(
                Problem(
                    group,
                    f"mixes GPUs: {lead} has {mine.text} but {host} has {other.text}; the group is planned "
                    "once, on one host's GPUs",
                    f"give the hosts with {other.count}x {other.kind} a GPU group of their own (a child "
                    "group of gpu_nodes)",
                )
            )
    return problems
