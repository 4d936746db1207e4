"""Rollout units: the hosts of a serving group pass each step of a rollout, and are restored, as one.

A serving group is one replica over several hosts (``vllm_fleet_serving_groups``): rank 0 serves
the API and is the group's only upstream on the gateways; the followers run ``--headless`` and join
it. So a failure of any member is the group's failure: every member goes back to its recorded
version together, and rank 0 goes back in service only once every member has been restored.

The order of a group's restore follows vLLM's launcher: rank 0 is the rendezvous (``--master-addr``
/``--master-port``, or the Ray head) and waits for every member, followers retry joining it; so
every member's container starts in the same step (those that still run their recorded version too,
:func:`unit_restarts`), the followers' own check is a running container,
rank 0's real completion proves the group, and rank 0 goes back in service last
(:func:`restore_verdict`). Stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def unit_of(units: Mapping[str, Sequence[str]], host: str) -> list[str]:
    """The hosts replaced and restored with ``host`` (the plan's ``units``), rank 0 first; the host
    alone when the plan does not name it."""
    unit = units.get(host) if isinstance(units, Mapping) else None
    return [str(h) for h in unit] if unit else [str(host)]


def stragglers(unit: Sequence[str], reached: Mapping[str, Any], step: str) -> list[str]:
    """Members of ``unit`` that did not pass ``step`` (``reached``: host -> the last step it passed).

    One of them failed on the way (it waits for the rescue): the others must fail too, so that
    every member of the group enters the restore together.
    """
    return [str(h) for h in unit if str(reached.get(h) or "") != str(step)]


def unit_restarts(unit: Sequence[str], rollbacks: Mapping[str, Any], unchanged: Sequence[str]) -> list[str]:
    """The models of a member to restart at their recorded version with the members restored.

    ``rollbacks``: member -> the models its restore returns to the version before; ``unchanged``:
    this member's models that already run it. A member cannot rejoin a rank 0 that was replaced
    (nor a new member join it): when any member of a serving group is restored, every member's
    containers start again in the same step. A host serving alone restarts nothing.
    """
    if len(unit) < 2 or not any(rollbacks.get(h) for h in unit):
        return []
    return [str(m) for m in unchanged]


def restore_verdict(host: str, unit: Sequence[str], errors: Mapping[str, Any]) -> dict[str, Any]:
    """Whether ``host`` goes back in service once its unit's restore has run.

    ``errors``: member -> why its restore failed ("" or absent when it succeeded). The unit goes
    back in service only when every member was restored: the gateway never routes to a group with
    a member left on the new version, or on none. Returns ``{undrain, failed, unit}``: ``failed``
    lists the members (``host`` among them or not) whose restore failed.
    """
    members = [str(h) for h in unit] or [str(host)]
    failed = [h for h in members if str(errors.get(h) or "").strip()]
    return {"undrain": not failed, "failed": failed, "unit": members}
