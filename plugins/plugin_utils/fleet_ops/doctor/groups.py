"""Serving groups: the members of one replica must run the same driver and CUDA, reach rank 0's
rendezvous port and keep their clocks together (NCCL and Gloo time out on skewed peers' barriers)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .results import FAIL, PASS, WARN, result


def _skew(rec: Mapping[str, Any]) -> float | None:
    """The host's clock minus the control node's, inside the probe's round trip (0 when within it)."""
    clock = (rec.get("probe") or {}).get("time") or {}
    now, sent = clock.get("epoch"), clock.get("controller_time")
    if now in (None, "") or sent in (None, ""):
        return None
    now, sent = float(now), float(sent)
    late = float(rec["received_time"]) if rec.get("received_time") not in (None, "") else sent
    return now - sent if now < sent else (now - late if now > late else 0.0)


def _same(
    check: str, name: str, members: list[Mapping[str, Any]], key: str, what: str, fix: str
) -> list[dict[str, Any]]:
    values = {str(m["host"]): str((m.get("gpu") or {}).get(key) or "") for m in members}
    lead = str(members[0]["host"])
    odd = [h for h, v in values.items() if v != values[lead]]
    if not values[lead]:
        return []
    if not odd:
        return [result(check, lead, name, PASS, f"every member runs {what} {values[lead]}")]
    return [
        result(
            check,
            host,
            name,
            FAIL,
            f"{what} {values[host] or 'unknown'} but {lead} (rank 0) runs {values[lead]}: the members of one "
            "replica load the same NCCL and kernels",
            fix,
        )
        for host in odd
    ]


def check_serving_groups(
    records: Iterable[Mapping[str, Any]], settings: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """One result per check per serving group; records carry ``serving_group`` (the
    ``vllm_serving_group_of`` dict) and, on followers, ``rendezvous`` (``{target, reachable, detail}``)."""
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for rec in records:
        group = rec.get("serving_group") or {}
        if group.get("name") and rec.get("probe"):
            by_group.setdefault(str(group["name"]), []).append(rec)
    limit = float(settings.get("max_clock_skew_s", 1.0))
    out: list[dict[str, Any]] = []
    for name, members in sorted(by_group.items()):
        members.sort(key=lambda r: int((r.get("serving_group") or {}).get("rank") or 0))
        subject = f"group {name}"
        out += _same(
            "group_driver",
            subject,
            members,
            "driver_version",
            "driver",
            "install the same NVIDIA driver on every member (playbooks/hosts.yml, one driver branch)",
        )
        out += _same(
            "group_cuda",
            subject,
            members,
            "cuda_version",
            "CUDA",
            "install the same driver (its CUDA version follows) on every member",
        )
        skews = {str(m["host"]): _skew(m) for m in members}
        known = {h: s for h, s in skews.items() if s is not None}
        if len(known) > 1:
            spread = max(known.values()) - min(known.values())
            fast, slow = max(known, key=known.__getitem__), min(known, key=known.__getitem__)
            detail = f"clocks of the members differ by up to {spread:.1f} s ({fast} ahead of {slow})"
            if spread <= limit:
                out.append(result("group_clock", str(members[0]["host"]), subject, PASS, detail))
            else:
                out.append(
                    result(
                        "group_clock",
                        fast,
                        subject,
                        FAIL,
                        detail + f", more than {limit:g} s",
                        "sync every member's clock to one NTP source (chrony)",
                    )
                )
        for member in members[1:]:
            reach = member.get("rendezvous") or {}
            if not reach.get("target"):
                continue
            if reach.get("reachable"):
                out.append(
                    result(
                        "group_rendezvous", str(member["host"]), subject, PASS, f"reaches {reach['target']}"
                    )
                )
            else:
                out.append(
                    result(
                        "group_rendezvous",
                        str(member["host"]),
                        subject,
                        WARN,
                        f"cannot reach rank 0's rendezvous {reach['target']} "
                        f"({reach.get('detail') or 'no answer'}); before the group is deployed nothing "
                        "listens there",
                        f"allow TCP {reach['target']} from this host (firewall, security group), then run "
                        "the doctor with the group deployed",
                    )
                )
    return out
