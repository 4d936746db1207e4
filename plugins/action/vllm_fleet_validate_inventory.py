"""Action plugin: check the whole inventory on the control node (see the module's documentation).

Only the rendering of each host's values lives here (it needs Ansible's templar); the checks are the pure
plugin_utils/fleet_validate package.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import ansible.errors
from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase
from ansible.utils.vars import load_extra_vars
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_validate import (
    GPU_PROFILE_VAR,
    REMOVED,
    Unresolved,
    load_catalogue,
    validate_inventory,
    yaml_problems,
)

ARGUMENT_SPEC = {"hosts": {"type": "list", "elements": "str"}}
_UNDEFINED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined")
# A template that can never render (2.17/2.18 wrap Jinja's errors in a plain AnsibleError with these words);
# a failing lookup or a vault secret without its password only needs what the deployment has.
_SYNTAX = getattr(ansible.errors, "AnsibleTemplateSyntaxError", None)
_TEMPLATE_WORDS = re.compile(
    r"template error while templating string|Syntax error in template|No (filter|test) named"
)

try:  # ansible-core 2.19+
    from ansible.parsing.vault import EncryptedString as _Encrypted
except ImportError:  # pragma: no cover - ansible-core 2.17/2.18
    from ansible.parsing.yaml.objects import AnsibleVaultEncryptedUnicode as _Encrypted


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _validated, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        task_vars = task_vars or {}
        hostvars = task_vars["hostvars"]
        groups = {name: list(members) for name, members in task_vars.get("groups", {}).items()}
        wanted = args["hosts"] or sorted({h for name, members in groups.items() for h in members})
        sources = [str(s) for s in task_vars.get("ansible_inventory_sources") or []]
        # a variables file that does not parse stops Ansible with no file named: name it first
        unparsed = yaml_problems(sources, os.getcwd())
        if unparsed:
            result.update(changed=False, failed=True, problems=unparsed, checked=0, planned=0)
            result["msg"] = "the inventory does not parse, nothing was changed:\n" + "\n".join(unparsed)
            return result
        cat = load_catalogue()
        hosts, facts = {}, {}
        for host in wanted:
            raw = hostvars.raw_get(host)
            if not isinstance(raw, Mapping):
                continue
            templar = self._templar.copy_with_new_env(available_variables=raw)
            names = [n for n in raw if (cat.governs(n) or n in REMOVED) and not n.startswith("__")]
            names += [GPU_PROFILE_VAR] if GPU_PROFILE_VAR in raw else []
            hosts[host] = {name: self._render(templar, raw[name]) for name in names}
            cached = raw.get("ansible_facts") or {}
            facts[host] = cached.get("nvidia_gpu") if isinstance(cached, Mapping) else None
        config_dir = next(
            (
                h["fleet_plan_config_dir"]
                for h in hosts.values()
                if isinstance(h.get("fleet_plan_config_dir"), str)
            ),
            None,
        )
        if config_dir is None and sources:
            config_dir = sources[0] if os.path.isdir(sources[0]) else os.path.dirname(sources[0])
        problems, planned = validate_inventory(
            hosts, groups, sources, os.getcwd(), cat, facts, config_dir or ".", self._extra_var_names()
        )
        result.update(changed=False, problems=problems, checked=len(hosts), planned=planned)
        if problems:
            result.update(
                failed=True,
                msg=f"{len(problems)} problem(s) in the inventory, nothing was changed:\n"
                + "\n".join(problems),
            )
        else:
            result["msg"] = (
                f"the inventory is valid ({len(hosts)} hosts checked; {planned} (GPU group, model) "
                "plan(s) made "
                "from cached GPU facts, playbooks/plan.yml plans the rest)"
            )
        return result

    def _render(self, templar: Any, value: Any) -> Any:
        """The value as its host sees it, leaf by leaf; ``Unresolved`` where it cannot be judged here."""
        if isinstance(value, _Encrypted):
            return Unresolved("vault-encrypted")
        if isinstance(value, Mapping):
            return {key: self._render(templar, item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._render(templar, item) for item in value]
        if not isinstance(value, str) or "{{" not in value and "{%" not in value:
            return value
        try:
            rendered = templar.template(value)
        except AnsibleUndefinedVariable as exc:
            found = _UNDEFINED.search(str(exc))
            return Unresolved("undefined", found.group(1) if found else str(exc).splitlines()[0])
        except AnsibleError as exc:
            return _unrendered(exc)
        if isinstance(rendered, _Encrypted):
            return Unresolved("vault-encrypted")
        try:
            return self._plain(rendered)
        except AnsibleError as exc:
            return Unresolved(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def _extra_var_names(self) -> set[str]:
        """The variables given as extra vars (-e, or an AWX credential): they win over every file."""
        try:
            return set(load_extra_vars(self._loader))
        except (AnsibleError, KeyError, TypeError):
            return set()

    def _plain(self, value: Any) -> Any:
        if isinstance(value, _Encrypted):
            return Unresolved("vault-encrypted")
        if isinstance(value, Mapping):
            return {key: self._plain(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._plain(item) for item in value]
        if isinstance(value, str):
            return str(value)  # a vault secret decrypts here, or fails without its password
        return value


def _unrendered(exc: AnsibleError) -> Unresolved:
    """A template that failed: an ``error`` to report when it can never render, else not judged here."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if (_SYNTAX is not None and isinstance(exc, _SYNTAX)) or _TEMPLATE_WORDS.search(first):
        return Unresolved("template error", error=first.split(". String:", 1)[0].rstrip("."))
    return Unresolved(first)
