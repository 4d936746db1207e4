"""Canary analysis of the rollout gate: the canary against live peers measured in the same window.

The gate's probe (``plugins/modules/fleet_rollout_canary_probe.py``) sends the same small streaming
completion to the canary and to peers still serving the version before, interleaved (canary, peer1,
peer2, canary, ...) after a warm-up, so a load on the machine weighs on both alike. Per metric
(``ttft_seconds``, ``total_seconds``) a one-sided Mann-Whitney U test asks whether the canary is slower
than ``max(factor x peer, floor)`` with confidence, and a seeded bootstrap bounds the ratio of medians;
then, Kayenta-style, one overall verdict:

* ``fail``: some metric is slower than allowed with confidence (U test p < 1 - confidence, the
  ratio's lower bound above the factor, the canary's median above the floor), or the canary failed
  probes the peers answered.
* ``inconclusive``: too few samples, or slower than allowed by the medians but not with confidence.
  It passes (``ok``), with a warning, when the canary answered every probe; with
  ``inconclusive="fail"`` it fails instead.
* ``pass``: otherwise.

With no live peer (a model on one host, the last batch) the canary is compared with the baseline
recorded at deploy time (one sample, perhaps on a quiet machine): only after a warm-up and with at
least ``min_samples`` samples, by a sign test of the canary's median against ``max(factor x baseline,
floor)``; the verdict says so.

scipy is not on the hosts nor the controller, so the U test (exact, else normal with ties) is here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from statistics import median
from typing import Any

METRICS = ("ttft_seconds", "total_seconds")
# the deploy-time baseline's name of each metric (vllm_server_ready: the streamed TTFT, the completion)
BASELINE_OF = {"ttft_seconds": "ttft_seconds", "total_seconds": "completion_seconds"}
BOOTSTRAP_ROUNDS = 2000
SEED = 20240526
EXACT_MAX = 25  # exact U distribution up to this many samples on each side (and no ties)


def _numbers(values: Any) -> list[float]:
    out = []
    for value in values or []:
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if number >= 0 and math.isfinite(number):
            out.append(number)
    return out


@cache
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings give U = 0..m*n (U: pairs where the x is above the y)."""
    if m == 0 or n == 0:
        return (1,)
    # the largest value is an x (it beats every y: U grows by n) or a y (it beats no x)
    with_x, with_y = _u_counts(m - 1, n), _u_counts(m, n - 1)
    out = [0] * (m * n + 1)
    for u, count in enumerate(with_x):
        out[u + n] += count
    for u, count in enumerate(with_y):
        out[u] += count
    return tuple(out)


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """One-sided Mann-Whitney U test that ``x`` is stochastically greater than ``y``: (U, p-value).

    Exact when both sides have at most EXACT_MAX samples and no value ties, else the normal
    approximation with the tie correction and a continuity correction.
    """
    m, n = len(x), len(y)
    if not m or not n:
        return 0.0, 1.0
    u = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
    pooled = sorted([*x, *y])
    ties = [pooled.count(v) for v in set(pooled)]
    if max(m, n) <= EXACT_MAX and max(ties) == 1:
        counts = _u_counts(m, n)
        return u, sum(counts[math.ceil(u) :]) / math.comb(m + n, m)
    total = m + n
    tie_term = sum(t**3 - t for t in ties) / (total * (total - 1))
    sigma = math.sqrt(m * n / 12.0 * ((total + 1) - tie_term))
    if sigma == 0:
        return u, 1.0
    z = (u - m * n / 2.0 - 0.5) / sigma
    return u, 0.5 * math.erfc(z / math.sqrt(2))


def sign_test_greater(x: Sequence[float], limit: float) -> float:
    """One-sided sign test that the median of ``x`` is above ``limit``: P(Bin(n', 1/2) >= above)."""
    above = sum(1 for v in x if v > limit)
    n = sum(1 for v in x if v != limit)
    if not n:
        return 1.0
    return sum(math.comb(n, k) for k in range(above, n + 1)) / 2**n


def ratio_lower_bound(
    x: Sequence[float], y: Sequence[float] | None, confidence: float, base: float = 0.0
) -> float:
    """Seeded bootstrap lower bound of median(x) / median(y) (or / ``base`` when ``y`` is None)."""
    rng = random.Random(SEED)
    ratios = []
    for _round in range(BOOTSTRAP_ROUNDS):
        top = median(rng.choices(x, k=len(x)))
        bottom = median(rng.choices(y, k=len(y))) if y else base
        ratios.append(top / max(bottom, 1e-9))
    ratios.sort()
    return ratios[max(0, int(math.floor((1 - confidence) * BOOTSTRAP_ROUNDS)) - 1)]


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _against_peers(
    metric: str,
    canary: list[float],
    peers: Mapping[str, list[float]],
    factor: float,
    floor: float,
    min_samples: int,
    confidence: float,
) -> dict[str, Any]:
    pooled = [v for values in peers.values() for v in values]
    row: dict[str, Any] = {
        "metric": metric,
        "reference": "peers",
        "n": len(canary),
        "n_reference": len(pooled),
        "canary_median": _r(median(canary)) if canary else None,
        "reference_median": _r(median(pooled)) if pooled else None,
        "peer_medians": {h: _r(median(v)) for h, v in peers.items() if v},
        "ratio": None,
        "bound": None,
        "p_value": None,
        "limit": None,
    }
    if len(canary) < min_samples or len(pooled) < min_samples:
        row.update(
            verdict="inconclusive",
            reason=f"{metric}: {len(canary)} canary and {len(pooled)} peer samples, fewer than {min_samples}",
        )
        return row
    c_med, p_med = median(canary), median(pooled)
    limit = max(factor * p_med, floor)
    _u, p_value = mann_whitney_greater(canary, [max(factor * v, floor) for v in pooled])
    ratio = c_med / max(p_med, 1e-9)
    bound = ratio_lower_bound(canary, pooled, confidence)
    row.update(ratio=_r(ratio, 3), bound=_r(bound, 3), p_value=_r(p_value, 6), limit=_r(limit))
    said = (
        f"{metric} canary {c_med:.3f}s vs peers {p_med:.3f}s: {ratio:.2f}x "
        f"(at least {bound:.2f}x at {confidence:.0%}, Mann-Whitney p={p_value:.3g}), allowed {factor:g}x"
        f"{f' or {floor:g}s' if floor else ''}"
    )
    alpha = 1 - confidence
    if p_value < alpha and bound > factor and c_med > floor:
        row.update(verdict="fail", reason=f"{said}: slower with confidence")
    elif c_med > limit:
        row.update(verdict="inconclusive", reason=f"{said}: slower by the medians, not with confidence")
    else:
        row.update(verdict="pass", reason=said)
    return row


def _against_baseline(
    metric: str,
    canary: list[float],
    baseline: Mapping[str, Any] | None,
    factor: float,
    floor: float,
    min_samples: int,
    confidence: float,
    warmup: int,
) -> dict[str, Any]:
    base_name = BASELINE_OF[metric]
    base = _numbers([(baseline or {}).get(base_name)])
    row: dict[str, Any] = {
        "metric": metric,
        "reference": "baseline",
        "n": len(canary),
        "n_reference": 1 if base else 0,
        "canary_median": _r(median(canary)) if canary else None,
        "reference_median": _r(base[0]) if base else None,
        "peer_medians": {},
        "ratio": None,
        "bound": None,
        "p_value": None,
        "limit": None,
    }
    if not base:
        row.update(
            verdict="inconclusive", reason=f"{metric}: no live peer and no recorded {base_name} baseline"
        )
        return row
    if len(canary) < min_samples or warmup < 1:
        row.update(
            verdict="inconclusive",
            reason=(
                f"{metric}: no live peer, and {len(canary)} canary samples after {warmup} warm-up "
                f"requests are too few to judge against the recorded baseline (at least {min_samples} "
                "after 1 warm-up)"
            ),
        )
        return row
    c_med = median(canary)
    limit = max(factor * base[0], floor)
    p_value = sign_test_greater(canary, limit)
    ratio = c_med / max(base[0], 1e-9)
    bound = ratio_lower_bound(canary, None, confidence, base[0])
    row.update(ratio=_r(ratio, 3), bound=_r(bound, 3), p_value=_r(p_value, 6), limit=_r(limit))
    said = (
        f"{metric} canary {c_med:.3f}s vs recorded baseline {base[0]:.3f}s (limit {limit:.3f}s, "
        f"sign test p={p_value:.3g})"
    )
    if p_value < 1 - confidence and c_med > limit:
        row.update(verdict="fail", reason=f"{said}: slower with confidence")
    elif c_med > limit:
        row.update(verdict="inconclusive", reason=f"{said}: slower by the median, not with confidence")
    else:
        row.update(verdict="pass", reason=said)
    return row


def canary_analysis(
    probe: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    factor: float = 3.0,
    floor: float = 1.0,
    min_samples: int = 5,
    confidence: float = 0.95,
    inconclusive: str = "pass",
) -> dict[str, Any]:
    """Judge a canary from paired samples of it and of live peers (see the module's docstring).

    ``probe``: the result of ``fleet_rollout_canary_probe``: ``samples`` (metric -> ``{canary: [s],
    peers: {host: [s]}}``), ``errors`` (``{canary: n, peers: {host: n}}``), ``requests`` (per
    target, warm-up excluded) and ``warmup``. ``baseline``: the deploy-time ``baseline`` of the
    version before, used only when no peer answered. Returns ``{verdict, ok, warning, reason,
    reference, peers, metrics, errors, samples, summary}``.
    """
    factor, floor, confidence = float(factor), float(floor), float(confidence)
    min_samples = max(int(min_samples), 2)
    if factor < 1:
        raise ValueError(f"fleet_rollout_gate_latency_factor must be 1 or more (got {factor})")
    if not 0.5 <= confidence < 1:
        raise ValueError(f"fleet_rollout_gate_confidence must be in [0.5, 1) (got {confidence})")
    if inconclusive not in ("pass", "fail"):
        raise ValueError(f"fleet_rollout_gate_inconclusive must be pass or fail (got {inconclusive!r})")
    samples = probe.get("samples") if isinstance(probe.get("samples"), Mapping) else {}
    errors = probe.get("errors") if isinstance(probe.get("errors"), Mapping) else {}
    requests = probe.get("requests") if isinstance(probe.get("requests"), Mapping) else {}
    warmup = int(probe.get("warmup") or 0)
    clean: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        entry = samples.get(metric) if isinstance(samples.get(metric), Mapping) else {}
        peers = entry.get("peers") if isinstance(entry.get("peers"), Mapping) else {}
        clean[metric] = {
            "canary": _numbers(entry.get("canary")),
            "peers": {str(h): _numbers(v) for h, v in peers.items()},
        }
    # a peer that answered nothing is no reference (down, unreachable): it is named, not compared
    answered = sorted({h for m in clean.values() for h, v in m["peers"].items() if v})
    silent = sorted({h for m in clean.values() for h in m["peers"]} - set(answered))
    rows = []
    for metric in METRICS:
        canary = clean[metric]["canary"]
        peers = {h: v for h, v in clean[metric]["peers"].items() if h in answered}
        if answered:
            rows.append(_against_peers(metric, canary, peers, factor, floor, min_samples, confidence))
        else:
            rows.append(
                _against_baseline(metric, canary, baseline, factor, floor, min_samples, confidence, warmup)
            )
    canary_errors = int(errors.get("canary") or 0)
    canary_requests = int(requests.get("canary") or 0)
    peer_errors = {h: int(v or 0) for h, v in (errors.get("peers") or {}).items() if h in answered}
    peer_requests = sum(int((requests.get("peers") or {}).get(h) or 0) for h in answered)
    problems = []
    if canary_errors:
        canary_rate = canary_errors / max(canary_requests, 1)
        peer_rate = sum(peer_errors.values()) / peer_requests if peer_requests else 0.0
        text = f"the canary failed {canary_errors} of {canary_requests} probes"
        if answered and peer_rate >= canary_rate:
            problems.append(("inconclusive", f"{text}, its peers as many ({peer_rate:.0%})"))
        else:
            problems.append(("fail", f"{text}: {probe.get('canary_error') or 'no detail'}"))
    verdicts = [r["verdict"] for r in rows] + [p[0] for p in problems]
    verdict = "fail" if "fail" in verdicts else "inconclusive" if "inconclusive" in verdicts else "pass"
    warning = ""
    if verdict == "inconclusive":
        ok = inconclusive == "pass" and canary_errors == 0
        warning = (
            "inconclusive, passed because the canary answered every probe "
            "(fleet_rollout_gate_inconclusive: pass)"
            if ok
            else "inconclusive, failed (fleet_rollout_gate_inconclusive: fail, or the canary failed probes)"
        )
    else:
        ok = verdict == "pass"
    if answered:
        reference = f"against live peer(s) {', '.join(answered)} in the same window"
    else:
        reference = (
            "no live peer answered"
            + (f" ({', '.join(silent)} did not)" if silent else "")
            + f": against the baseline recorded at deploy time (one sample, perhaps on a quiet machine), "
            f"after {warmup} warm-up request(s)"
        )
    deciding = [r["reason"] for r in rows if r["verdict"] == verdict] + [
        p[1] for p in problems if p[0] == verdict
    ]
    reason = f"{verdict}: {reference}: " + "; ".join(deciding or [r["reason"] for r in rows])
    return {
        "verdict": verdict,
        "ok": ok,
        "warning": warning,
        "reason": reason,
        "reference": "peers" if answered else "baseline",
        "peers": answered,
        "silent_peers": silent,
        "metrics": {r["metric"]: r for r in rows},
        "errors": {"canary": canary_errors, "peers": peer_errors},
        "samples": clean,
        "summary": reason,
    }


def canary_peer_hosts(
    plan: Mapping[str, Any] | None,
    host: str,
    unit: Iterable[str],
    models_by_host: Mapping[str, Any],
    models: Iterable[str],
    limit: int = 2,
) -> list[str]:
    """The hosts whose vLLM servers a canary's models are compared with: up to ``limit`` per model.

    Live peers still serve the version before: the hosts after the canary's batch in the plan's
    ``order`` (``order[next_index[host]:]``), then the serving hosts outside the rollout (``--limit``),
    in ``models_by_host`` order (host -> its ``vllm_server_models``); never the canary's ``unit``,
    nor a follower of a serving group (it serves no HTTP). Without a plan, every other host.
    """
    plan = plan if isinstance(plan, Mapping) else {}
    order = [str(h) for h in plan.get("order") or []]
    start = (plan.get("next_index") or {}).get(host, len(order))
    left_out = {str(host), *map(str, unit or []), *map(str, plan.get("followers") or [])}
    candidates = [*order[int(start) :], *(str(h) for h in models_by_host if str(h) not in order)]
    out: list[str] = []
    for model in models:
        serving = [
            h
            for h in candidates
            if h not in left_out
            and any(isinstance(m, Mapping) and m.get("name") == model for m in models_by_host.get(h) or [])
        ]
        out += [h for h in serving[: max(int(limit), 0)] if h not in out]
    return out


def canary_peers(
    endpoints_by_host: Mapping[str, Any], models: Iterable[str], limit: int = 2
) -> dict[str, list[dict[str, str]]]:
    """Model -> the live peers a canary of it is compared with: ``[{host, url, image}]``.

    ``endpoints_by_host``: host -> its ``vllm_serving_endpoints`` (the hosts still serving the
    version before, the canary's own unit left out by the caller). Recorded deployments first (the
    URL vLLM really listens on), then declared ones, in the order given; at most ``limit`` per model.
    """
    out: dict[str, list[dict[str, str]]] = {}
    for model in models:
        found = []
        for host, endpoints in endpoints_by_host.items():
            for entry in endpoints or []:
                if isinstance(entry, Mapping) and entry.get("name") == model and entry.get("url"):
                    key = str(entry.get("key") or model)
                    label = str(host) if key == model else f"{host}/{key}"
                    found.append(
                        {
                            "host": label,
                            "url": str(entry["url"]),
                            "image": str(entry.get("image") or ""),
                            "recorded": bool(entry.get("recorded")),
                        }
                    )
        found.sort(key=lambda p: not p["recorded"])  # stable: the given order within each kind
        out[str(model)] = [
            {k: v for k, v in p.items() if k != "recorded"} for p in found[: max(int(limit), 0)]
        ]
    return out
