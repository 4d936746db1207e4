"""Regression guard over the replay of public vLLM startup logs (tests/accuracy/cases)."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

ACCURACY = Path(__file__).resolve().parents[4] / "accuracy"
_spec = importlib.util.spec_from_file_location("fleet_planner_accuracy_replay", ACCURACY / "run.py")
assert _spec is not None and _spec.loader is not None
replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(replay)

CASES = sorted((ACCURACY / "cases").glob("*.json"))


def _errors(key: str, pred_key: str, scale: float) -> list[float]:
    out = []
    for path in CASES:
        case = replay.load_case(path)
        if key not in case["expected"]:
            continue
        result = replay.predict(case)
        pred = result["per_gpu"][pred_key] if pred_key in result["per_gpu"] else result[pred_key]
        out.append(abs(pred / scale - case["expected"][key]) / case["expected"][key])
    return out


def test_cases_cite_a_public_source() -> None:
    """A public log, or one recorded on a lent GPU with tests/gpu and kept in this repository."""
    assert len(CASES) >= 10
    root = Path(__file__).resolve().parents[5]
    for path in CASES:
        case = replay.load_case(path)
        source = case["source"]
        assert source.startswith("https://") or (root / source.split()[0]).is_file(), path.name


@pytest.mark.parametrize(
    ("key", "pred_key", "scale", "median_max"),
    [
        ("weights_gib", "weights_bytes", 1 << 30, 0.02),
        ("kv_cache_tokens", "kv_cache_tokens", 1, 0.10),
        ("available_kv_gib", "available_kv_cache_bytes", 1 << 30, 0.05),
    ],
)
def test_replay_median_error(key: str, pred_key: str, scale: float, median_max: float) -> None:
    errs = _errors(key, pred_key, scale)
    assert errs and statistics.median(errs) <= median_max
