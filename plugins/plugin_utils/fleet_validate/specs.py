"""What the collection knows: every role's argument_specs, and every variable name its roles and
playbooks read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# The collection root: plugins/plugin_utils/fleet_validate/<this file>
COLLECTION_ROOT = Path(__file__).resolve().parents[3]

# Former names, refused with the name that replaced them.
REMOVED = {
    "vllm_server_api_key": "vllm_fleet_api_key",
    "gateway_backend_api_key": "vllm_fleet_api_key",
}

# Fleet-wide prefixes beside the role names: a variable starting with one is the fleet's, so an
# unknown one is a typo.
EXTRA_PREFIXES = ("vllm_", "fleet_", "nvidia_", "model_weights_", "gateway_", "monitoring_")

# libyaml's loader where PyYAML was built with it (the same documents, several times faster)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


@dataclass(frozen=True)
class Option:
    role: str
    spec: Mapping[str, Any]


@dataclass
class Catalogue:
    options: dict[str, Option] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)
    defaults: dict[str, Any] = field(default_factory=dict)
    prefixes: tuple[str, ...] = ()

    def governs(self, name: str) -> bool:
        """True for names in the fleet's namespace (a role prefix), which must then be known."""
        return name.startswith(self.prefixes) and not name.startswith("__")


def load_defaults(root: Path = COLLECTION_ROOT) -> dict[str, Any]:
    """Every role's ``defaults/main.yml`` in one mapping (the first role in name order wins a name).

    Apart from :func:`load_catalogue`: a template reading one default (``vllm_fleet_var``) needs only these
    files, and each of Ansible's worker processes reads them anew."""
    defaults: dict[str, Any] = {}
    for path in sorted((root / "roles").glob("*/defaults/main.yml")):
        values = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER) or {}
        for name, value in values.items() if isinstance(values, dict) else ():
            defaults.setdefault(name, value)
    return defaults


def load_catalogue(root: Path = COLLECTION_ROOT) -> Catalogue:
    """Options of every role (the ``main`` entry point wins) and every name the collection reads."""
    cat = Catalogue()
    roles = sorted(p for p in (root / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
    for role_dir in roles:
        specs = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
        entries = (specs or {}).get("argument_specs") or {}
        for entry in sorted(entries, key=lambda name: name != "main"):
            for name, spec in ((entries[entry] or {}).get("options") or {}).items():
                cat.options.setdefault(name, Option(role_dir.name, spec or {}))
    cat.defaults = load_defaults(root)
    cat.prefixes = tuple(sorted({r.name + "_" for r in roles} | set(EXTRA_PREFIXES)))
    cat.known = set(cat.options)
    texts = list((root / "playbooks").glob("*.yml"))
    for role_dir in roles:
        for sub in ("defaults", "vars", "tasks", "handlers", "templates", "meta"):
            texts += [p for p in (role_dir / sub).rglob("*") if p.is_file()]
    for path in texts:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        cat.known |= {name for name in _NAME.findall(text) if cat.governs(name)}
    cat.known -= set(REMOVED)
    return cat
