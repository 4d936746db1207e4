"""A role's variable read from outside the role, with the role's own default: one definition.

Ansible shows a role's defaults only inside that role (and the roles depending on it); ``hostvars[host]``
holds the inventory, extra vars and facts, never role defaults. A role that reads another role's
variable (the doctor probing what vllm_server will run, the rollout gate reaching vllm_server's
containers) therefore asks :func:`role_value`: the host's value, else the default in the owning role's
``defaults/main.yml``, following defaults that name another variable (``vllm_server_image:
"{{ vllm_fleet_vllm_image }}"``). Nobody restates a default, so changing it in its role changes it for
every reader (tests/unit/plugins/plugin_utils/fleet_validate/test_role_defaults.py fails on a
``| default(<literal>)`` of another role's variable).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .specs import Catalogue, load_defaults

# a default that is exactly one other variable: "{{ vllm_fleet_vllm_image }}", or another role's read through
# vllm_fleet_var:
#   "{{ hostvars[inventory_hostname] | vllm_fleet.vllm_fleet.vllm_fleet_var('model_weights_root') }}"
REFERENCE = re.compile(
    r"^\{\{\s*(?:([a-z][a-z0-9_]*)|hostvars\[inventory_hostname\]\s*\|\s*(?:vllm_fleet\.vllm_fleet\.)?"
    r"vllm_fleet_var\(\s*'([a-z][a-z0-9_]*)'\s*\))\s*\}\}$"
)


@lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    return load_defaults()


def role_default(name: str, catalogue: Catalogue | None = None) -> Any:
    """The default of ``name`` in its role's ``defaults/main.yml`` (unresolved). Raises ValueError for a
    variable no role defines."""
    defaults = catalogue.defaults if catalogue else _defaults()
    if name not in defaults:
        raise ValueError(f"{name} is not a variable any role of the collection defines a default for")
    return defaults[name]


def role_value(hvars: Mapping[str, Any] | None, name: str, catalogue: Catalogue | None = None) -> Any:
    """``name`` as a host has it (``hostvars[host]``), else its role's default; a default naming another
    variable is that variable as the host has it, else its default, and so on. Raises ValueError for an
    unknown name, a loop, or a default that is a template other than one variable (it cannot be rendered
    here)."""
    hvars = hvars or {}
    seen: list[str] = []
    while True:
        if name in hvars:
            return hvars[name]
        if name in seen:
            raise ValueError(f"the defaults of {' -> '.join([*seen, name])} name each other")
        seen.append(name)
        value = role_default(name, catalogue)
        if not isinstance(value, str) or "{" not in value:
            return value
        found = REFERENCE.match(value.strip())
        if not found:
            raise ValueError(
                f"the default of {name} ({value!r}) is a template, not one variable: read it inside its role"
            )
        name = found.group(1) or found.group(2)
