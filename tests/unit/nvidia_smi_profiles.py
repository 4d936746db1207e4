"""Shared helpers for the nvidia-smi tests: the GPU profiles under tests/data/nvidia-smi/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROFILES_DIR = ROOT / "tests" / "data" / "nvidia-smi"
STANDIN = ROOT / "tests" / "lab" / "nvidia-smi"
INSTALLER = ROOT / "tests" / "lab" / "install-nvidia-smi-standin"


def profile_names() -> list[str]:
    return sorted(p.parent.name for p in PROFILES_DIR.glob("*/profile.json"))


def load_profile(name: str) -> dict[str, Any]:
    return json.loads((PROFILES_DIR / name / "profile.json").read_text())


def capture(name: str, invocation: str) -> str | None:
    """Text of the file a profile replays for an invocation, None when not captured."""
    outputs = load_profile(name)["outputs"]
    if invocation not in outputs:
        return None
    return (PROFILES_DIR / name / outputs[invocation]).read_text()


MODULE = ROOT / "plugins" / "modules" / "nvidia_gpu_facts.py"
# Runs the module file as Ansible would after packaging it: its module_utils import resolves in the
# collection (collections/ links back to this clone).
RUNNER = textwrap.dedent(
    """
    import runpy, sys
    sys.path.insert(0, sys.argv[1])
    module, args = sys.argv[2], sys.argv[3]
    sys.argv = [module, args]
    runpy.run_path(module, run_name="__main__")
    """
)


def run_module(
    tmp_path: Path, args: dict, standin_dir: Path | None = None, path_env: str | None = None
) -> dict:
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = {k: v for k, v in os.environ.items() if k != "NVIDIA_SMI_STANDIN_DIR"}
    if standin_dir is not None:
        env["NVIDIA_SMI_STANDIN_DIR"] = str(standin_dir)
    if path_env is not None:
        env["PATH"] = path_env
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, str(ROOT / "collections"), str(MODULE), str(args_file)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.stdout, result.stderr
    return json.loads(result.stdout)
