"""Shared helpers for the nvidia-smi tests: the GPU profiles under tests/data/nvidia-smi/."""

from __future__ import annotations

import json
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
