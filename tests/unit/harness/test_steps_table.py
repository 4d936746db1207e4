"""make test's per-step table: seconds per step and the serving vLLMs each started (tests/steps_table.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("steps_table", Path(__file__).parents[2] / "steps_table.py")
steps_table = importlib.util.module_from_spec(SPEC)
sys.modules["steps_table"] = steps_table
SPEC.loader.exec_module(steps_table)

VLLM = {"image": "vllm-fleet/vllm-cpu:0.32.0-canary", "io.vllm-fleet.cuda-version": "none", "name": "x"}
OTHER = {"image": "vllm-fleet/debian-systemd:bookworm", "name": "node"}


def event(status: str, cid: str, when: float, attrs: dict) -> str:
    return json.dumps(
        {"status": status, "id": cid, "timeNano": int(when * 1e9), "Actor": {"Attributes": attrs}}
    )


def test_counts_serving_vllms_per_step_not_short_runs_or_other_images(tmp_path: Path) -> None:
    steps = tmp_path / "steps.tsv"
    steps.write_text("release drift\t100\t160\tok\nmolecule serving\t160\t700\tFAILED\n")
    events = tmp_path / "events.jsonl"
    events.write_text(
        "\n".join(
            [
                event("start", "help", 110, VLLM),  # vllm serve --help: 3 s, not a start
                event("die", "help", 113, VLLM),
                event("start", "node", 170, OTHER),  # a node container: not vLLM
                event("start", "a", 200, VLLM),  # served 300 s
                event("die", "a", 500, VLLM),
                event("start", "b", 600, VLLM),  # still running when the step ended
                event("start", "a", 650, VLLM),  # the same container restarted ...
                event("die", "a", 655, VLLM),  # ... and dead in 5 s: not a serving start
                "not json",
            ]
        )
    )
    runs = steps_table.vllm_runs(events.read_text().splitlines())
    parsed = steps_table.read_steps(steps.read_text().splitlines())
    assert [steps_table.vllm_starts(s, runs) for s in parsed] == [0, 2]
    out = steps_table.table(parsed, runs)
    assert "molecule serving" in out and "FAILED" in out
    assert out.splitlines()[-1].split()[-2:] == ["600", "2"]


def test_no_events_file_still_prints_the_seconds(tmp_path: Path, capsys) -> None:
    steps = tmp_path / "steps.tsv"
    steps.write_text("pytest\t0\t325\tok\n")
    assert steps_table.main(["x", str(steps), str(tmp_path / "missing.jsonl")]) == 0
    assert "pytest" in capsys.readouterr().out


def test_steps_side_by_side_count_their_shared_time_and_starts_once(tmp_path: Path) -> None:
    # sanity began beside ansible-lint; the two molecule scenarios of one batch overlap too
    lines = ["ansible-lint\t0\t100\tok", "ansible-test sanity\t0\t130\tok", "pytest\t130\t430\tok",
             "molecule hosts\t500\t800\tok", "molecule weights\t500\t700\tok"]  # fmt: skip
    parsed = steps_table.read_steps(lines)
    assert steps_table.wall_seconds(parsed) == 130 + 300 + 300
    runs = [(520.0, 900.0)]  # a vLLM started during both scenarios of the batch
    assert [steps_table.vllm_starts(s, runs) for s in parsed] == [0, 0, 0, 1, 1]
    out = steps_table.table(parsed, runs).splitlines()
    assert out[-1].split()[-2:] == ["730", "1"]
    assert out[1].endswith("ok (side by side)") and out[3].endswith("ok")  # pytest ran alone
