"""Clock checks: skew against the control node and NTP synchronisation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .results import FAIL, PASS, SKIP, WARN, result


def check_time(rec: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    host, probe = rec["host"], rec.get("probe") or {}
    clock = probe.get("time") or {}
    results = []
    now, sent = clock.get("epoch"), clock.get("controller_time")
    received = rec.get("received_time")
    limit = float(settings["max_clock_skew_s"])
    if now is not None and sent not in (None, ""):
        # The host read its clock between the control node sending the probe and receiving the answer:
        # a correct clock lies inside that window, so only the distance outside it is skew.
        now, sent = float(now), float(sent)
        late = float(received) if received not in (None, "") else sent
        skew = now - sent if now < sent else (now - late if now > late else 0.0)
        window = f" (the probe's round trip: {late - sent:.1f} s)" if late > sent else ""
        detail = f"{skew:+.1f} s against the control node{window}"
        if abs(skew) <= limit:
            results.append(result("clock_skew", host, "clock", PASS, detail))
        else:
            results.append(
                result(
                    "clock_skew",
                    host,
                    "clock",
                    FAIL,
                    detail
                    + f", more than {limit:g} s: TLS, tokens, logs and metrics break with skewed clocks",
                    "sync the clock (chrony or systemd-timesyncd) on this host and on the control node",
                )
            )
    if clock.get("container"):
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                SKIP,
                "runs in a container: its clock is the host kernel's; check time sync on the container host",
            )
        )
        return results
    chrony = clock.get("chrony") or {}
    synced = clock.get("ntp_synchronized")
    if chrony.get("leap_status"):
        ok = chrony["leap_status"] == "Normal"
        detail = f"chrony: leap status {chrony['leap_status']}, reference {chrony.get('reference') or '?'}"
        if chrony.get("offset_s") is not None:
            detail += f", offset {chrony['offset_s'] * 1000:+.1f} ms"
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                PASS if ok else FAIL,
                detail,
                "" if ok else "check `chronyc sources -v`: are the NTP servers reachable (UDP 123)?",
            )
        )
    elif synced is True:
        results.append(
            result(
                "time_sync", host, "NTP", PASS, f"synchronized ({clock.get('ntp_service') or 'timedatectl'})"
            )
        )
    elif synced is False:
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                FAIL,
                "the system clock is not NTP-synchronized",
                "install and enable chrony (or systemd-timesyncd: timedatectl set-ntp true)",
            )
        )
    else:
        results.append(
            result(
                "time_sync",
                host,
                "NTP",
                WARN,
                "neither timedatectl nor chronyc answered",
                "install chrony and check `chronyc tracking`",
            )
        )
    return results
