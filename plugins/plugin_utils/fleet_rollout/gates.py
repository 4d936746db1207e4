"""Decisions of a rollout: the latency gate, what a failed host needs restored, the soak verdict."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

LATENCY_METRICS = ("completion_seconds", "ttft_seconds")


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def failed_checks(results: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The readiness checks that did not pass, from a loop registered with ``failed_when: false``.

    Such a loop marks no result as failed, so a check passed only when it says ``ready: true``;
    skipped checks (check mode) are neither passed nor failed.
    """
    return [
        r
        for r in results or []
        if isinstance(r, Mapping) and not r.get("skipped") and r.get("ready") is not True
    ]


def latency_gate(
    measurements: Iterable[Mapping[str, Any]],
    baseline: Mapping[str, Any] | None,
    factor: float,
    floor: float,
) -> dict[str, Any]:
    """Compare readiness latencies with the recorded baseline of the version that ran before.

    ``measurements``: results of the readiness check (``completion_seconds``, ``ttft_seconds``),
    the best of which counts; ``baseline``: the ``baseline`` of the previous deployment record.
    A latency passes when it is at most ``max(factor x baseline, floor)``; the floor keeps tiny,
    noisy baselines from failing healthy servers. A metric without a baseline is not judged.
    """
    factor = float(factor)
    floor = float(floor)
    if factor < 1:
        raise ValueError(f"fleet_rollout_gate_latency_factor must be 1 or more (got {factor})")
    rows = [m for m in measurements if isinstance(m, Mapping)]
    checks = []
    for metric in LATENCY_METRICS:
        values = [v for v in (_number(m.get(metric)) for m in rows) if v is not None]
        measured = min(values) if values else None
        base = _number((baseline or {}).get(metric))
        if measured is None:
            checks.append({"metric": metric, "measured": None, "baseline": base, "limit": None, "ok": False})
            continue
        if base is None:
            checks.append(
                {"metric": metric, "measured": measured, "baseline": None, "limit": None, "ok": True}
            )
            continue
        limit = max(factor * base, floor)
        checks.append(
            {
                "metric": metric,
                "measured": measured,
                "baseline": base,
                "limit": round(limit, 4),
                "ok": measured <= limit,
            }
        )
    failed = [c for c in checks if not c["ok"]]
    parts = []
    for check in checks:
        if check["measured"] is None:
            parts.append(f"{check['metric']}: not measured")
        elif check["baseline"] is None:
            parts.append(f"{check['metric']} {check['measured']:.3f}s (no recorded baseline)")
        else:
            parts.append(
                f"{check['metric']} {check['measured']:.3f}s vs baseline {check['baseline']:.3f}s "
                f"(limit {check['limit']:.3f}s)"
            )
    return {
        "ok": not failed,
        "checks": checks,
        "failed": [c["metric"] for c in failed],
        "summary": "; ".join(parts),
    }


def readiness_checks(fact: Any, models: Iterable[str]) -> list[dict[str, str]]:
    """How each of ``models`` is checked on this host after a change, from the ``vllm_fleet`` fact.

    ``http``: a real completion at the recorded URL. ``running``: a follower of a serving group,
    which serves no HTTP (``--headless``, no URL): its container must run, and its group's rank 0,
    whose readiness waits for every member, answers for it. Returns ``[{model, container, url,
    check, task}]`` in the order of ``models`` (task: what readiness probes, generate, embed or score).
    """
    recorded = _models(fact)
    out: list[dict[str, str]] = []
    for name in models:
        entry = recorded.get(str(name))
        current = entry.get("current") if isinstance(entry, Mapping) else None
        current = current if isinstance(current, Mapping) else {}
        member = current.get("serving_group")
        follower = isinstance(member, Mapping) and (
            member.get("role") == "follower" or str(member.get("rank") or 0) not in ("0", "")
        )
        out.append(
            {
                "model": str(name),
                "container": str(current.get("container") or ""),
                "url": str(current.get("url") or ""),
                "check": "running" if follower else "http",
                "task": str(current.get("task") or "generate"),
            }
        )
    return out


def container_name(prefix: str, model: str) -> str:
    """The vllm_server container name of a model (prefix + model name, unsafe characters as -)."""
    return f"{prefix}{re.sub(r'[^A-Za-z0-9_.-]', '-', str(model))}"


def _models(fact: Any) -> Mapping[str, Any]:
    models = fact.get("models") if isinstance(fact, Mapping) else None
    return models if isinstance(models, Mapping) else {}


def _version(entry: Any, which: str) -> str:
    record = entry.get(which) if isinstance(entry, Mapping) else None
    return str(record.get("version") or "") if isinstance(record, Mapping) else ""


def snapshot(fact: Any) -> dict[str, dict[str, Any]]:
    """What runs before a change: model -> its recorded current version, container and baseline."""
    out: dict[str, dict[str, Any]] = {}
    for name, entry in _models(fact).items():
        current = entry.get("current") if isinstance(entry, Mapping) else None
        if isinstance(current, Mapping) and current.get("version"):
            out[str(name)] = {
                "version": str(current["version"]),
                "container": str(current.get("container") or ""),
                "url": str(current.get("url") or ""),
                "image": str(current.get("image") or ""),
                "baseline": dict(current.get("baseline") or {}),
            }
    return out


def containers(before: Mapping[str, Any], fact: Any, declared: Iterable[str], prefix: str) -> dict[str, str]:
    """Model -> container name, for the models recorded before, recorded now or declared now."""
    out: dict[str, str] = {}
    models = _models(fact)
    for name in [*before, *models, *declared]:
        name = str(name)
        if name in out:
            continue
        recorded = (before.get(name) or {}).get("container") if isinstance(before.get(name), Mapping) else ""
        current = models.get(name, {}).get("current") if isinstance(models.get(name), Mapping) else None
        out[name] = (
            recorded
            or (str(current.get("container") or "") if isinstance(current, Mapping) else "")
            or container_name(prefix, name)
        )
    return out


def restore_plan(
    before: Mapping[str, Any], fact: Any, running: Mapping[str, Any], declared: Iterable[str]
) -> dict[str, Any]:
    """What a host needs so that every model runs the version it ran before a failed change.

    ``before``: :func:`snapshot` taken before the change; ``fact``: the ``vllm_fleet`` fact
    now; ``running``: model -> version of its running container ("" when there is none);
    ``declared``: the models the change declared. Returns ``rollback`` (models for
    ``vllm_server`` ``tasks_from: rollback``, which then returns each to the version it ran
    before), ``remove`` (models the change added: their containers go), ``unchanged`` and
    ``stuck`` (``[{model, reason}]``: cannot be restored from the records alone).
    """
    models = _models(fact)
    rollback: list[str] = []
    unchanged: list[str] = []
    stuck: list[dict[str, str]] = []
    for name in sorted(before):
        wanted = str((before[name] or {}).get("version") or "")
        entry = models.get(name)
        current = _version(entry, "current")
        previous = _version(entry, "previous")
        run = str(running.get(name) or "")
        if not current:
            stuck.append({"model": name, "reason": "its deployment record is gone (the model was removed)"})
        elif current != wanted:
            # the change was recorded: the role's rollback returns to the previous record
            if previous != wanted:
                stuck.append(
                    {"model": name, "reason": f"the previous record is {previous or 'missing'}, not {wanted}"}
                )
            elif run and run != current:
                stuck.append({"model": name, "reason": f"it runs {run}, neither {current} nor {wanted}"})
            else:
                rollback.append(name)
        elif run == wanted:
            unchanged.append(name)
        elif not run:
            stuck.append(
                {
                    "model": name,
                    "reason": f"its container is gone and version {wanted} is recorded as current",
                }
            )
        else:
            # a new container that was never recorded: the role's rollback restores the current record
            rollback.append(name)
    added = sorted({str(n) for n in declared} - set(before))
    remove = [name for name in added if running.get(name) is not None]
    return {"rollback": rollback, "remove": remove, "unchanged": unchanged, "stuck": stuck}


def _mean(total: float, count: float) -> float | None:
    return total / count if count else None


def soak_verdict(
    gateway: Mapping[str, Any],
    canary_upstreams: Iterable[str],
    vllm_delta: Mapping[str, Mapping[str, Any]],
    baseline_ttft: Mapping[str, Any] | None = None,
    max_error_rate: float = 0.0,
    latency_factor: float = 2.0,
    latency_floor: float = 0.5,
    min_requests: int = 10,
) -> dict[str, Any]:
    """Judge a canary after its soak from the gateway's log and its own vLLM metrics.

    ``gateway``: merged access log stats of the soak window; ``canary_upstreams``: the
    canary's ``address:port`` servers; ``vllm_delta``: model -> :func:`counters_delta` of the
    canary; ``baseline_ttft``: model -> time to first token recorded for the version before.
    Fails on an error rate above ``max_error_rate`` (gateway tries to the canary, or vLLM's
    5xx and failed requests), or on a canary latency (gateway header time; else vLLM's time
    to first token) above ``max(latency_factor x reference, latency_floor)`` where the
    reference is the other servers in the same window (else the recorded baseline).
    Fewer than ``min_requests`` requests judge nothing (a note says so).
    """
    canary = {str(u) for u in canary_upstreams}
    upstreams = gateway.get("upstreams") or {}
    mine = [s for a, s in upstreams.items() if a in canary]
    others = [s for a, s in upstreams.items() if a not in canary]

    def total(rows: list[Mapping[str, Any]], key: str) -> float:
        return float(sum(float(r.get(key) or 0) for r in rows))

    tries = total(mine, "tries")
    gw_errors = total(mine, "errors")
    canary_header = _mean(total(mine, "header_time_sum"), total(mine, "header_time_count"))
    other_header = _mean(total(others, "header_time_sum"), total(others, "header_time_count"))
    vllm_requests = sum(
        max(float(d.get("http_requests") or 0), float(d.get("finished") or 0)) for d in vllm_delta.values()
    )
    vllm_errors = sum(
        float(d.get("http_errors") or 0) + float(d.get("finished_error") or 0) for d in vllm_delta.values()
    )
    ttft_count = sum(float(d.get("ttft_count") or 0) for d in vllm_delta.values())
    ttft = _mean(sum(float(d.get("ttft_sum") or 0) for d in vllm_delta.values()), ttft_count)
    problems: list[str] = []
    notes: list[str] = []
    if tries >= min_requests and gw_errors / tries > max_error_rate:
        problems.append(
            f"gateway: {int(gw_errors)} of {int(tries)} requests to the canary failed "
            f"({gw_errors / tries:.1%} > fleet_rollout_soak_max_error_rate {max_error_rate:.1%})"
        )
    if vllm_requests >= min_requests and vllm_errors / vllm_requests > max_error_rate:
        problems.append(
            f"vLLM: {int(vllm_errors)} of {int(vllm_requests)} requests failed "
            f"({vllm_errors / vllm_requests:.1%} > fleet_rollout_soak_max_error_rate {max_error_rate:.1%})"
        )
    if tries < min_requests and vllm_requests < min_requests:
        notes.append(
            f"the canary served {int(max(tries, vllm_requests))} requests during the soak, fewer than "
            f"fleet_rollout_soak_min_requests ({min_requests}): errors and latency were not judged"
        )
    other_count = total(others, "header_time_count")
    if (
        canary_header is not None
        and other_header is not None
        and total(mine, "header_time_count") >= min_requests
        and other_count >= min_requests
    ):
        limit = max(latency_factor * other_header, latency_floor)
        if canary_header > limit:
            problems.append(
                f"gateway: the canary answers in {canary_header:.3f}s on average, the other servers in "
                f"{other_header:.3f}s (limit {limit:.3f}s = "
                f"fleet_rollout_soak_latency_factor {latency_factor} x)"
            )
    elif ttft is not None and ttft_count >= min_requests:
        bases = [b for b in (_number(v) for v in (baseline_ttft or {}).values()) if b is not None]
        if bases:
            limit = max(latency_factor * max(bases), latency_floor)
            if ttft > limit:
                problems.append(
                    f"vLLM: time to first token {ttft:.3f}s on average, recorded baseline {max(bases):.3f}s "
                    f"(limit {limit:.3f}s = fleet_rollout_soak_latency_factor {latency_factor} x)"
                )
        else:
            notes.append(
                "no recorded time-to-first-token baseline and no other server to compare latency with"
            )
    figures = {
        "gateway_requests": int(tries),
        "gateway_errors": int(gw_errors),
        "gateway_header_seconds": None if canary_header is None else round(canary_header, 4),
        "others_header_seconds": None if other_header is None else round(other_header, 4),
        "vllm_requests": int(vllm_requests),
        "vllm_errors": int(vllm_errors),
        "vllm_ttft_seconds": None if ttft is None else round(ttft, 4),
    }
    summary = (
        f"gateway {figures['gateway_requests']} requests, {figures['gateway_errors']} failed, "
        f"header time {figures['gateway_header_seconds']}s (others {figures['others_header_seconds']}s); "
        f"vLLM {figures['vllm_requests']} requests, {figures['vllm_errors']} failed, "
        f"TTFT {figures['vllm_ttft_seconds']}s"
    )
    return {"ok": not problems, "problems": problems, "notes": notes, "figures": figures, "summary": summary}
