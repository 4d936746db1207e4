"""Models served on MIG instances (``vllm_server_models[].mig``): the selection, TP 1, the ports they take."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fleet_planner.mig import PROFILE_RE, UUID_RE
from ..fleet_serving.deploy import ServingError
from ..fleet_serving.mig import serving_units
from .cross import HostView, _entries
from .problems import Problem, has_unresolved


def _selection_problems(var: str, selection: Any, host: str) -> list[Problem]:
    if selection == "all":
        return []
    if isinstance(selection, str) or not isinstance(selection, list) or not selection:
        return [
            Problem(
                var,
                f"{selection!r} is not a MIG selection",
                "write mig: all, or a list of GPU-instance profiles and MIG UUIDs as nvidia-smi -L prints "
                "them (e.g. [3g.40gb] or [MIG-...])",
                host,
            )
        ]
    problems = []
    seen: set[str] = set()
    for index, item in enumerate(selection):
        ref = str(item).strip()
        if UUID_RE.match(ref) or PROFILE_RE.match(ref):
            if ref in seen:
                problems.append(Problem(f"{var}[{index}]", f"{ref} is listed twice", "list it once", host))
            seen.add(ref)
            continue
        gi = ref.split(".", 1)[1] if PROFILE_RE.match(ref.split(".", 1)[-1]) and "c." in ref else None
        problems.append(
            Problem(
                f"{var}[{index}]",
                f"{ref!r} is neither a GPU-instance profile nor a MIG UUID"
                + (" (it names a compute instance)" if gi else ""),
                f"write {gi}" if gi else "copy a profile (3g.40gb) or a MIG-... UUID from nvidia-smi -L",
                host,
            )
        )
    return problems


def check_mig(view: HostView, facts: Mapping[str, Any] | None = None) -> list[Problem]:
    """Each MIG model's selection, its tensor parallelism, and the ports its instances take.

    With the host's cached GPU facts the instances are resolved as the deployment will (a selection
    that matches none, an instance of two models, a port of another model); without them each listed
    item counts as at least one instance.
    """
    served = _entries(view.get("vllm_server_models", []))
    problems: list[Problem] = []
    mig_models = []
    for index, entry in enumerate(served):
        selection = entry.get("mig")
        if selection in (None, "") or has_unresolved(selection):
            continue
        var = f"vllm_server_models[{index}].mig"
        found = _selection_problems(var, selection, view.host)
        overrides = entry.get("overrides")
        tp = overrides.get("tensor_parallel_size") if isinstance(overrides, Mapping) else None
        if tp not in (None, 1):
            found.append(
                Problem(
                    f"vllm_server_models[{index}].overrides.tensor_parallel_size",
                    f"is {tp}, but {entry.get('name')} is served on MIG instances, one each (vLLM has no "
                    "tensor parallelism across MIG instances)",
                    "remove it, or drop mig to serve the model on whole GPUs",
                    view.host,
                )
            )
        problems += found
        if not found:
            mig_models.append((index, entry))
    if not mig_models or has_unresolved(served):
        return problems
    if isinstance(facts, Mapping) and facts.get("gpus"):
        try:
            serving_units(list(served), facts)
        except ServingError as exc:
            what, _sep, fix = str(exc).removeprefix("vllm_server_models: ").partition(". Fix: ")
            problems.append(Problem("vllm_server_models", what, fix or "see nvidia-smi -L", view.host))
        return problems
    return problems + _port_overlaps(served, dict(mig_models), view.host)


def _port_overlaps(
    served: list[Mapping[str, Any]], mig: Mapping[int, Mapping[str, Any]], host: str
) -> list[Problem]:
    """Ports of other models inside the range a MIG model takes at least (one port per listed item)."""
    problems = []
    for index, entry in mig.items():
        port, selection = entry.get("port"), entry.get("mig")
        if not isinstance(port, int) or isinstance(port, bool) or selection == "all":
            continue
        last = port + len(selection) - 1
        for other_index, other in enumerate(served):
            other_port = other.get("port")
            if other_index != index and isinstance(other_port, int) and port < other_port <= last:
                problems.append(
                    Problem(
                        f"vllm_server_models[{other_index}].port",
                        f"{other_port} is inside {port}-{last}, the ports {entry.get('name')} takes on its "
                        f"{len(selection)} MIG instances",
                        f"give {other.get('name')} a port outside {port}-{last}",
                        host,
                    )
                )
    return problems
