"""The gateway's access log (nginx, format ``vllm_fleet``): answers and timings per upstream server."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# '$remote_addr - $vf_client [$time_local] "$request" $status $body_bytes_sent "$referer" "$agent" '
# then key=value fields; a value lists one entry per upstream tried, separated by ", ".
_HEAD = re.compile(
    r'^\S+ - \S+ \[[^\]]*\] "(?:[^"\\]|\\.)*" (\d{3}) \S+ "(?:[^"\\]|\\.)*" "(?:[^"\\]|\\.)*"\s*(.*)$'
)
_FIELD_SPLIT = re.compile(r"\s(?=[a-z_]+=)")


def parse_line(line: str) -> dict[str, Any] | None:
    """One access log line as ``{status, model, tries: [{upstream, status, header_time}]}``.

    ``tries`` lists the upstream servers nginx tried, in order (the last one answered).
    Lines that reached no upstream (401, 429, health checks) have no tries. None for a line
    that is not in the gateway's format.
    """
    match = _HEAD.match(line.strip())
    if not match:
        return None
    fields: dict[str, str] = {}
    for part in _FIELD_SPLIT.split(match.group(2)):
        key, sep, value = part.partition("=")
        if sep:
            fields[key] = value.strip().strip('"')
    upstreams = _split(fields.get("upstream", "-"))
    statuses = _split(fields.get("upstream_status", "-"))
    headers = _split(fields.get("upstream_header_time", "-"))
    tries = []
    for index, upstream in enumerate(upstreams):
        if upstream in ("-", ""):
            continue
        tries.append(
            {
                "upstream": upstream,
                "status": _int(statuses[index] if index < len(statuses) else "-"),
                "header_time": _float(headers[index] if index < len(headers) else "-"),
            }
        )
    return {"status": int(match.group(1)), "model": fields.get("model", ""), "tries": tries}


def _split(value: str) -> list[str]:
    # nginx separates servers of one upstream with ", " and internal redirects with " : "
    return [item.strip() for item in re.split(r",\s*|\s+:\s+", value)]


def _int(value: str) -> int | None:
    return int(value) if value.isdigit() else None


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def upstream_stats(lines: Iterable[str]) -> dict[str, Any]:
    """Aggregate access log lines per upstream server address.

    Returns ``{lines, routed, client_errors, upstreams: {address: {tries, errors, ok,
    header_time_sum, header_time_count, client_5xx}}}``: ``errors`` are tries answered
    with 5xx or not answered (connection refused, timeout); ``client_5xx`` the requests that
    tried this server and ended in a 5xx for the client.
    """
    out: dict[str, Any] = {"lines": 0, "routed": 0, "client_errors": 0, "upstreams": {}}
    for line in lines:
        parsed = parse_line(line)
        if parsed is None:
            continue
        out["lines"] += 1
        if not parsed["tries"]:
            continue
        out["routed"] += 1
        client_error = parsed["status"] >= 500
        out["client_errors"] += int(client_error)
        for attempt in parsed["tries"]:
            stats = out["upstreams"].setdefault(
                attempt["upstream"],
                {
                    "tries": 0,
                    "errors": 0,
                    "ok": 0,
                    "header_time_sum": 0.0,
                    "header_time_count": 0,
                    "client_5xx": 0,
                },
            )
            stats["tries"] += 1
            status = attempt["status"]
            if status is None or status >= 500:
                stats["errors"] += 1
            elif status < 400:
                stats["ok"] += 1
                if attempt["header_time"] is not None:
                    stats["header_time_sum"] += attempt["header_time"]
                    stats["header_time_count"] += 1
            stats["client_5xx"] += int(client_error)
    return out


def merge_stats(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum :func:`upstream_stats` results of several gateways."""
    out: dict[str, Any] = {"lines": 0, "routed": 0, "client_errors": 0, "upstreams": {}}
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        for key in ("lines", "routed", "client_errors"):
            out[key] += int(part.get(key) or 0)
        for address, stats in (part.get("upstreams") or {}).items():
            mine = out["upstreams"].setdefault(address, dict.fromkeys(stats, 0))
            for key, value in stats.items():
                mine[key] = mine.get(key, 0) + value
    return out
