"""Models served on MIG GPU instances: one vLLM container per instance, each with its own port.

A model entry with ``mig`` (``all`` or a list of GPU-instance profiles and MIG UUIDs) becomes one
serving unit per selected instance. Units of a model share its served name (the gateway routes the
name over all of them) and differ in ``key`` (``<name>@gpu0-gi2``: the record, the container name),
``port`` (the model's port, then the next ones in instance order) and the device the container gets.
A model entry without ``mig`` is one unit whose key is its name, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.mig import mig_targets
from .deploy import ServingError


def unit_key(name: str, label: str | None) -> str:
    """The record key of a unit: the model name, ``<name>@<instance label>`` on a MIG instance."""
    return f"{name}@{label}" if label else name


def serving_units(models: Any, facts: Any = None) -> list[dict[str, Any]]:
    """The containers of a host's ``vllm_server_models``: one per model, one per MIG instance with ``mig``.

    Each unit is the model entry plus ``key``, ``model_index`` (its entry in ``models``), ``port`` and,
    on MIG, ``mig_target`` (see :func:`..fleet_planner.mig.mig_targets`). Raises :class:`ServingError`
    when a selection matches nothing, one instance is given to two models, a unit's port is already
    another's, or a MIG model asks for tensor parallelism.
    """
    if not isinstance(models, list):
        raise ServingError(f"vllm_server_models must be a list of {{name, path, port}}, got {models!r}")
    units: list[dict[str, Any]] = []
    owners: dict[str, str] = {}
    for index, model in enumerate(models):
        if not isinstance(model, Mapping):
            raise ServingError(f"vllm_server_models[{index}] must be a mapping, got {model!r}")
        name = str(model.get("name"))
        selection = model.get("mig")
        if selection in (None, "", []):
            units.append({**model, "key": name, "model_index": index})
            continue
        tp = (
            (model.get("overrides") or {}).get("tensor_parallel_size")
            if isinstance(model.get("overrides"), Mapping)
            else None
        )
        if tp not in (None, 1, "1"):
            raise ServingError(
                f"vllm_server_models[{name}].overrides.tensor_parallel_size is {tp} but the model is served "
                "on MIG instances, one instance each (vLLM has no tensor parallelism across MIG instances). "
                "Fix: remove it, or drop mig and serve the model on whole GPUs"
            )
        try:
            targets = mig_targets(facts or {}, selection, model.get("gpus"))
        except PlanInputError as exc:
            raise ServingError(f"vllm_server_models[{name}]: {exc}") from None
        try:
            base = int(model.get("port"))
        except (TypeError, ValueError):
            raise ServingError(
                f"vllm_server_models[{name}].port must be a number, got {model.get('port')!r}"
            ) from None
        for offset, target in enumerate(targets):
            if target["label"] in owners:
                raise ServingError(
                    f"vllm_server_models[{name}].mig: GPU {target['gpu']} instance "
                    f"{target['gpu_instance_id']} "
                    f"({target['profile']}) is also served by {owners[target['label']]}. Fix: give each "
                    "model its own instances (list profiles or MIG UUIDs in mig)"
                )
            owners[target["label"]] = name
            units.append(
                {
                    **model,
                    "key": unit_key(name, target["label"]),
                    "model_index": index,
                    "port": base + offset,
                    "mig_target": target,
                }
            )
    _check_ports(units)
    return units


def _check_ports(units: list[dict[str, Any]]) -> None:
    taken: dict[int, dict[str, Any]] = {}
    for unit in units:
        try:
            port = int(unit.get("port"))
        except (TypeError, ValueError):
            continue  # the role's entry checks name the bad port
        other = taken.get(port)
        if other is not None:
            mig = next((u for u in (unit, other) if u.get("mig_target")), None)
            why = (
                f" ({mig['name']} takes one port per MIG instance from its port on: "
                f"{_range([u for u in units if u['name'] == mig['name']])})"
                if mig
                else ""
            )
            raise ServingError(
                f"vllm_server_models: port {port} is both {other['key']} and {unit['key']}{why}. "
                "Fix: give each model a port outside the others' ranges"
            )
        taken[port] = unit


def _range(units: list[dict[str, Any]]) -> str:
    ports = sorted(int(u["port"]) for u in units)
    return f"{ports[0]}-{ports[-1]}" if len(ports) > 1 else str(ports[0])


def mig_device_requests(target: Mapping[str, Any], driver: str = "nvidia") -> list[dict[str, Any]]:
    """Docker ``device_requests`` giving a container the one MIG device it serves on.

    ``nvidia``: the MIG UUID (what NVIDIA_VISIBLE_DEVICES takes); ``cdi``: the CDI name
    ``nvidia.com/gpu=<gpu>:<mig device>`` that ``nvidia-ctk cdi generate`` writes per MIG device.
    """
    if driver == "nvidia":
        if not target.get("uuid"):
            raise ServingError(
                f"GPU {target.get('gpu')} instance {target.get('gpu_instance_id')} has no MIG UUID in the "
                "facts (nvidia-smi -L did not answer). Fix: re-read the GPU facts, or set "
                "vllm_server_gpu_request_driver: cdi"
            )
        return [{"driver": "nvidia", "device_ids": [str(target["uuid"])], "capabilities": [["gpu"]]}]
    if driver == "cdi":
        name = f"nvidia.com/gpu={target.get('gpu')}:{target.get('mig_device')}"
        return [{"driver": "cdi", "device_ids": [name]}]
    raise ServingError(f"vllm_server_gpu_request_driver must be nvidia or cdi, got {driver!r}")
