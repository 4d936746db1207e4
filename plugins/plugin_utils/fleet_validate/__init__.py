"""The whole inventory checked on the control node before any host is touched (playbooks/validate.yml).

- ``specs``: every role's argument_specs and every variable name the collection reads (``load_catalogue``)
- ``names``: unknown and removed variables, with the closest known name (``check_names``)
- ``argspec``: types, choices, required and unknown sub-options, as Ansible validates them (``check_option``)
- ``cross``: across roles: served models fetched, keys and tiers, hubs and revisions, groups, ports
- ``serving_groups``: the hosts that serve one replica together agree (models, GPUs, rendezvous address)
- ``mig``: models served on MIG instances: the selection, tensor parallelism 1, the ports they take
- ``models``: adapter names and base models, flags in extra_args the planner owns, GPU indexes a host has
- ``gpus``: a host's GPUs as the control node knows them; one GPU type per GPU group, one GPU group per host
- ``plans``: the plan of each fleet_plan_models entry that the control node can make alone (``check_plans``)
- ``sources``: which inventory file (or the extra vars) sets a variable, so each problem names it once
- ``problems``: ``Problem``, ``Unresolved`` and the one-line report (``format_problems``)
- ``yaml_files``: the inventory files that do not parse, named with their line (also a script: validate.yml)
- ``inventory``: all of the above over the whole inventory (``check_inventory``, ``validate_inventory``)

The names below are imported from their submodules when first read: a filter that needs only ``values``
does not load every check (and the planner they call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .gpus import GPU_PROFILE_VAR
    from .inventory import check_inventory, validate_inventory
    from .names import closest
    from .plans import check_plans
    from .problems import Problem, Unresolved, format_problems, has_unresolved, is_unresolved
    from .sources import EXTRA_VARS, inventory_sources, where_from
    from .specs import REMOVED, Catalogue, load_catalogue
    from .yaml_files import yaml_problems

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "gpus": ("GPU_PROFILE_VAR",),
        "inventory": ("check_inventory", "validate_inventory"),
        "names": ("closest",),
        "plans": ("check_plans",),
        "problems": ("Problem", "Unresolved", "format_problems", "has_unresolved", "is_unresolved"),
        "sources": ("EXTRA_VARS", "inventory_sources", "where_from"),
        "specs": ("REMOVED", "Catalogue", "load_catalogue"),
        "yaml_files": ("yaml_problems",),
    },
)

__all__ = [
    "EXTRA_VARS",
    "GPU_PROFILE_VAR",
    "REMOVED",
    "Catalogue",
    "Problem",
    "Unresolved",
    "check_inventory",
    "check_plans",
    "closest",
    "format_problems",
    "has_unresolved",
    "inventory_sources",
    "is_unresolved",
    "load_catalogue",
    "validate_inventory",
    "where_from",
    "yaml_problems",
]
