"""Every check over every host record, in the order the report lists them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .clock import check_time
from .gpu import check_cuda, check_gpu_state, check_topology
from .groups import check_serving_groups
from .memory import check_ram, check_shm
from .network import check_ports
from .plans import Planner
from .results import FAIL, WARN, result
from .settings import host_settings
from .storage import check_disk


def evaluate(
    records: Iterable[Mapping[str, Any]],
    settings: Mapping[str, Any] | None = None,
    hub: list[dict[str, Any]] | None = None,
    planner: Planner | None = None,
    cuda_check: Callable[..., Any] | None = None,
) -> list[dict[str, Any]]:
    """Every check over every host record, then the hub results.

    A record's own ``settings`` (the host's fleet_doctor_* variables) win over ``settings``.
    """
    records = list(records)  # read twice: per host, then per serving group
    out: list[dict[str, Any]] = []
    for rec in records:
        merged = host_settings(rec, settings)
        if not rec.get("probe"):
            out.append(
                result(
                    "probe",
                    rec.get("host", "?"),
                    "host",
                    FAIL,
                    "the probe did not run (host unreachable or the module failed)",
                    "fix the connection to the host, then run the doctor again",
                )
            )
            continue
        if (rec.get("probe") or {}).get("errors"):
            for err in rec["probe"]["errors"]:
                out.append(result("probe", rec["host"], "probe", WARN, err))
        out += check_gpu_state(rec, merged)
        out += check_cuda(rec, merged, cuda_check)
        out += check_topology(rec, planner)
        out += check_disk(rec, merged)
        out += check_ram(rec, merged, planner)
        out += check_shm(rec, merged)
        out += check_ports(rec, merged)
        out += check_time(rec, merged)
    out += check_serving_groups(records, host_settings({}, settings))
    out += hub or []
    return out
