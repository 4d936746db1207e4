"""One way for tests to run ansible-playbook against this clone as the collection, and explain a failure."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_playbook(
    playbook: str | Path, inventory: str | Path, *extra: str, timeout: float = 900, **env: str
) -> subprocess.CompletedProcess:
    """``ansible-playbook -i inventory playbook *extra`` from the repository root.

    The fact cache is in memory so a test's stand-in or short-lived hosts never outlive the run;
    colour is off so assertions read plain text. ``env`` adds or overrides variables.
    """
    run_env = {
        **os.environ,
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        **env,
    }
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(REPO / playbook), *extra],
        env=run_env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def explain(result: subprocess.CompletedProcess) -> str:
    """The error lines and the end of an ansible-playbook run, for assertion messages."""
    lines = (result.stdout + result.stderr).splitlines()
    errors = [line for line in lines if line.startswith(("fatal:", "failed:", "[ERROR]"))]
    return "\n".join(errors[-10:] + ["..."] + lines[-40:])


def molecule_inventory() -> str:
    """The inventory molecule wrote for the scenario being verified."""
    return os.environ.get("MOLECULE_INVENTORY_FILE") or str(
        Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory"
    )


def inventory_vars(group: str, inventory: str | Path) -> dict:
    """The variables of the first host of ``group`` (literal values only, as ansible-inventory lists them)."""
    out = subprocess.run(
        ["ansible-inventory", "-i", str(inventory), "--list"], check=True, capture_output=True, text=True
    ).stdout
    data = json.loads(out)
    return data["_meta"]["hostvars"][data[group]["hosts"][0]]
