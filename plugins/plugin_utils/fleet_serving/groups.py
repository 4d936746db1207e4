"""Serving groups: the hosts of one inventory group serve one replica of their models together.

``vllm_fleet_serving_groups`` names them (each entry a child group of ``gpu_nodes``, or
``{group, backend, rendezvous_port, interface}``); several groups are several replicas. The first
host of the group (Ansible's ``groups[name]`` order) is rank 0: it runs the API server, the others
join it. Through vLLM's own launcher: ``--nnodes/--node-rank/--master-addr/--master-port`` with
``--headless`` followers (multiprocessing, the default where the release has it), or a Ray cluster
(``--distributed-executor-backend ray``) when asked for or on older releases. Stdlib only.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.versions import parse_version
from .deploy import ServingError, split_flags, stable_hash

VAR = "vllm_fleet_serving_groups"
BACKENDS = ("auto", "mp", "ray")
# First release whose multiprocessing executor spans nodes (--nnodes, --node-rank, --master-addr; the
# executor change merged in November 2025, documented in 0.12): older releases span nodes with Ray.
MP_MULTINODE_SINCE = (0, 12, 0)
# vLLM's --master-port default, and Ray's GCS port default.
MP_PORT = 29501
RAY_PORT = 6379
# Flags that tie the members together: they come from the group, never from a model's extra_args.
GROUP_FLAGS = (
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--headless",
    "--distributed-executor-backend",
    "--data-parallel-address",
)


@dataclass(frozen=True, slots=True)
class ServingGroup:
    """One replica's hosts, rank 0 first, and how they meet."""

    name: str
    members: tuple[str, ...]
    backend: str = "auto"
    rendezvous_port: int | None = None
    interface: str = ""

    @property
    def rank0(self) -> str:
        return self.members[0]

    def rank(self, host: str) -> int:
        return self.members.index(host)

    def port(self, backend: str) -> int:
        return self.rendezvous_port or (RAY_PORT if backend == "ray" else MP_PORT)


class GroupError(ServingError):
    """A bad serving group: ``variable`` is wrong (``what``); ``fix`` mends it. One line as text."""

    def __init__(self, variable: str, what: str, fix: str) -> None:
        super().__init__(f"{variable}: {what}. Fix: {fix}")
        self.variable, self.what, self.fix = variable, what, fix


def _entry(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, str):
        return {"group": raw}
    if not isinstance(raw, Mapping) or not isinstance(raw.get("group"), str) or not raw["group"]:
        raise GroupError(where, f"{raw!r} is not a group name", "write a group name or {group, backend, ...}")
    unknown = sorted(set(raw) - {"group", "backend", "rendezvous_port", "interface"})
    if unknown:
        raise GroupError(
            where,
            f"unknown key(s) {', '.join(unknown)}",
            "use group, backend, rendezvous_port, interface",
        )
    return dict(raw)


def _port(entry: Mapping[str, Any], where: str) -> int | None:
    raw = entry.get("rendezvous_port")
    if raw in (None, ""):
        return None
    try:
        port = int(raw)
    except (TypeError, ValueError):
        raise GroupError(f"{where}.rendezvous_port", f"{raw!r} is not a number", "write a port") from None
    if isinstance(raw, bool) or not 1024 <= port <= 65535:
        raise GroupError(
            f"{where}.rendezvous_port", f"{port} is outside 1024-65535", "pick a free port above 1023"
        )
    return port


def serving_groups(spec: Any, groups: Mapping[str, Sequence[str]]) -> list[ServingGroup]:
    """The serving groups of the inventory; ``groups``: Ansible's ``groups``.

    Raises :class:`GroupError` (one line, naming the entry and the fix) for an unknown or empty
    group, a host in two serving groups, a host outside ``gpu_nodes``, a bad backend or port.
    """
    if spec in (None, "", []):
        return []
    if not isinstance(spec, list):
        raise GroupError(
            VAR, f"{spec!r} is not a list", "list the inventory groups that serve one replica each"
        )
    gpu_hosts = set(groups.get("gpu_nodes") or [])
    owner: dict[str, str] = {}
    out: list[ServingGroup] = []
    for index, raw in enumerate(spec):
        where = f"{VAR}[{index}]"
        entry = _entry(raw, where)
        name = entry["group"]
        if name not in groups:
            raise GroupError(
                where, f"{name!r} is not a group of the inventory", "name a child group of gpu_nodes"
            )
        members = tuple(str(h) for h in groups[name])
        if not members:
            raise GroupError(where, f"group {name} has no hosts", f"add the hosts of one replica to {name}")
        for host in members:
            if host not in gpu_hosts:
                raise GroupError(
                    where, f"{host} of group {name} is not in gpu_nodes", f"add {host} to gpu_nodes"
                )
            if host in owner:
                raise GroupError(
                    where,
                    f"{host} is in serving groups {owner[host]} and {name}",
                    f"a host serves one replica: take {host} out of one of them",
                )
            owner[host] = name
        backend = str(entry.get("backend") or "auto")
        if backend not in BACKENDS:
            raise GroupError(
                f"{where}.backend", f"{backend!r} is not a backend", f"use one of {', '.join(BACKENDS)}"
            )
        out.append(
            ServingGroup(name, members, backend, _port(entry, where), str(entry.get("interface") or ""))
        )
    return out


def group_of(host: str, groups: Iterable[ServingGroup]) -> ServingGroup | None:
    """The serving group ``host`` belongs to, None for a host that serves on its own."""
    return next((g for g in groups if host in g.members), None)


def launcher(backend: str, vllm_version: str | None) -> str:
    """``mp`` or ``ray``: what the group runs under. ``auto`` is mp where the release has it."""
    try:
        version = parse_version(vllm_version)
    except PlanInputError as exc:
        raise ServingError(str(exc)) from None
    has_mp = version >= MP_MULTINODE_SINCE
    if backend == "mp" and not has_mp:
        raise ServingError(
            f"{VAR}: backend mp needs vLLM >= {'.'.join(map(str, MP_MULTINODE_SINCE))} (multi-node "
            f"multiprocessing), this image runs {vllm_version}; set backend: ray or a newer image"
        )
    if backend == "ray":
        return "ray"
    return "mp" if has_mp else "ray"


def check_extra_args(name: str, extra_args: Iterable[Any]) -> None:
    """A model of a group may not set the flags that join its members."""
    for flag, _values in split_flags(extra_args):
        if flag in GROUP_FLAGS:
            raise ServingError(
                f"vllm_server_models[{name}].extra_args sets {flag}: remove it, the serving group "
                f"({VAR}) sets it on every member"
            )


def member_launch(
    command: Sequence[str],
    group: ServingGroup,
    host: str,
    master_addr: str,
    own_addr: str,
    vllm_version: str | None,
) -> dict[str, Any]:
    """What ``host``'s container of a group runs: ``{backend, rank, role, entrypoint, command, port}``.

    ``command``: the model's ``vllm serve`` arguments (:func:`~.deploy.vllm_command`); ``master_addr``:
    rank 0's address, ``own_addr``: this member's. ``entrypoint`` is None where the image's own
    (``vllm serve``) runs the command; Ray members start their Ray node first in a shell.
    """
    if host not in group.members:
        raise ServingError(f"{host} is not a member of serving group {group.name}")
    if not master_addr:
        raise ServingError(
            f"serving group {group.name}: no rendezvous address for {group.rank0} (rank 0); set "
            f"vllm_server_listen_address or vllm_fleet_internal_address for {group.rank0}, "
            "or gather its facts"
        )
    backend = launcher(group.backend, vllm_version)
    rank, nodes, port = group.rank(host), len(group.members), group.port(backend)
    role = "leader" if rank == 0 else "follower"
    base = [str(a) for a in command]
    if backend == "mp":
        args = [
            *base,
            "--distributed-executor-backend",
            "mp",
            "--nnodes",
            str(nodes),
            "--node-rank",
            str(rank),
            "--master-addr",
            master_addr,
            "--master-port",
            str(port),
        ]
        if rank:
            args.append("--headless")  # followers run workers only; rank 0 serves the API
        return {
            "backend": "mp",
            "rank": rank,
            "role": role,
            "entrypoint": None,
            "command": args,
            "port": port,
        }
    ip = shlex.quote(own_addr or master_addr)
    if rank == 0:
        serve = shlex.join(["vllm", "serve", *base, "--distributed-executor-backend", "ray"])
        script = f"ray start --head --port={port} --node-ip-address={ip} && exec {serve}"
    else:
        # --block keeps the container alive as long as the Ray node: its exit is the member's failure
        script = (
            f"exec ray start --block --address={shlex.quote(f'{master_addr}:{port}')} --node-ip-address={ip}"
        )
    return {
        "backend": "ray",
        "rank": rank,
        "role": role,
        "entrypoint": ["/bin/sh", "-c"],
        "command": [script],
        "port": port,
    }


def _addresses(iface: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    ipv4 = iface.get("ipv4")
    for entry in [ipv4] if isinstance(ipv4, Mapping) else (ipv4 or []):
        if isinstance(entry, Mapping) and entry.get("address"):
            out.append(str(entry["address"]))
    for key in ("ipv4_secondaries", "ipv6"):
        for entry in iface.get(key) or []:
            if isinstance(entry, Mapping) and entry.get("address"):
                out.append(str(entry["address"]))
    return out


def interface_of(address: str, facts: Mapping[str, Any]) -> str:
    """The network interface holding ``address``, from Ansible's facts (``ansible_facts``); "" if none."""
    for name in facts.get("interfaces") or []:
        iface = facts.get(str(name).replace("-", "_"))
        if isinstance(iface, Mapping) and address in _addresses(iface):
            return str(iface.get("device") or name)
    return ""


def member_env(group: ServingGroup, host: str, address: str, facts: Mapping[str, Any]) -> dict[str, str]:
    """NCCL, Gloo and vLLM's own address for a member: the interface that holds the address vLLM uses."""
    iface = group.interface or interface_of(address, facts)
    if not iface:
        raise ServingError(
            f"serving group {group.name}: {host} has no network interface holding {address} in its facts; "
            f"set interface in {VAR} for {group.name}, or vllm_fleet_internal_address to one of its addresses"
        )
    return {"NCCL_SOCKET_IFNAME": iface, "GLOO_SOCKET_IFNAME": iface, "VLLM_HOST_IP": address}


def rdma_options(device_paths: Iterable[str]) -> dict[str, Any]:
    """Container options that let NCCL use InfiniBand/RoCE: the /dev/infiniband devices, locked memory.

    ``device_paths``: what the host has under /dev/infiniband (empty: TCP sockets only, nothing added).
    """
    paths = sorted({str(p) for p in device_paths if str(p).startswith("/dev/infiniband/")})
    if not paths:
        return {"devices": [], "capabilities": [], "ulimits": []}
    return {
        "devices": [f"{p}:{p}:rwm" for p in paths],
        "capabilities": ["IPC_LOCK"],  # RDMA registers pinned memory
        "ulimits": ["memlock:-1:-1"],
    }


def members_down(group: ServingGroup, healthy: Iterable[str]) -> list[str]:
    """Members that are not healthy: any one of them takes the whole replica out of service."""
    ok = {str(h) for h in healthy}
    return [h for h in group.members if h not in ok]


def membership(hvars: Mapping[str, Any], host: str) -> tuple[ServingGroup, int] | None:
    """``host``'s serving group and rank, from its variables (``hostvars[host]``: the fleet-wide
    ``vllm_fleet_serving_groups`` and Ansible's ``groups``); None for a host that serves alone."""
    spec, groups = hvars.get(VAR), hvars.get("groups")
    if spec in (None, "", []) or not isinstance(groups, Mapping):
        return None
    group = group_of(host, serving_groups(spec, groups))
    return (group, group.rank(host)) if group else None


def member_specs(
    specs: Sequence[Mapping[str, Any]],
    host: str,
    hostvars: Mapping[str, Mapping[str, Any]],
    rdma_paths: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The container specs of ``host`` (vllm_server's, one per model) as a member of its serving group.

    Each spec gets the member's launch (``command``, ``entrypoint``), the NCCL/Gloo/vLLM address
    environment, the InfiniBand devices, and ``group``/``rank``/``role``/``members``; followers get
    no ``url`` (nothing to route to: rank 0 is the replica's endpoint). Specs of a host that serves
    alone come back unchanged.
    """
    from .fleet import vllm_address  # fleet imports this module's membership

    hvars = hostvars[host]
    found = membership(hvars, host)
    if found is None:
        return [dict(s) for s in specs]
    group, rank = found
    master = vllm_address(hostvars.get(group.rank0) or {})
    own = vllm_address(hvars)
    env = member_env(group, host, own, hvars.get("ansible_facts") or {})
    rdma = rdma_options(rdma_paths)
    out = []
    for spec in specs:
        launch = member_launch(
            spec["command"], group, host, master, own, str(spec.get("vllm_version") or "") or None
        )
        out.append(
            {
                **spec,
                **rdma,
                "command": launch["command"],
                "entrypoint": launch["entrypoint"],
                "env": {**dict(spec.get("env") or {}), **env},
                "group": group.name,
                "members": list(group.members),
                "rank": rank,
                "role": launch["role"],
                "backend": launch["backend"],
                "rendezvous": f"{master}:{launch['port']}",
                "url": spec.get("url", "") if rank == 0 else "",
            }
        )
        # the member's launch is part of what runs: a new rank, rendezvous or interface is a new version
        joined = out[-1]
        joined["config_hash"] = stable_hash(
            [spec.get("config_hash"), *(joined[k] for k in ("command", "entrypoint", "env", "devices"))]
        )
    return out


def group_of_host(hvars: Mapping[str, Any], host: str) -> dict[str, Any]:
    """``{name, members, rank, rank0, backend, port}`` of ``host``'s serving group (``backend`` as it
    runs with the host's vLLM version, ``port`` the rendezvous port); {} for a host serving alone."""
    found = membership(hvars, host)
    if found is None:
        return {}
    group, rank = found
    # here, not at the top: fleet_validate imports this module
    from ..fleet_validate.values import role_value

    version = role_value(hvars, "vllm_server_vllm_version")  # the host's, else the fleet's default
    backend = launcher(group.backend, str(version) if version else None)
    return {
        "name": group.name,
        "members": list(group.members),
        "rank": rank,
        "rank0": group.rank0,
        "backend": backend,
        "port": group.port(backend),
    }


def group_gpu_spec(group: str, facts_by_host: Any, gpus: Any = None, shared: bool = False) -> dict[str, Any]:
    """The planner GPU dict of serving group ``group`` (filter vllm_serving_group_gpu_spec).

    ``facts_by_host``: ``[[host, nvidia_gpu facts], ...]`` in rank order; the planner's refusal is raised
    as :class:`ServingError`."""
    # here, not at the top: it loads the whole planner, which the other filters over this module never need
    from ..fleet_planner.group import group_gpu_spec as planner_group_gpu_spec

    try:
        return planner_group_gpu_spec(str(group), [(str(h), f) for h, f in facts_by_host], gpus, bool(shared))
    except PlanInputError as exc:
        raise ServingError(str(exc)) from None
