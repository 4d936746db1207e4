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


def cpu_line(when: float, busy: float, containers: dict[str, float]) -> str:
    return json.dumps({"t": when, "busy": busy, "cores": 2, "containers": containers})


def test_cpu_columns_split_a_steps_cpu_between_vllm_nodes_and_control(tmp_path: Path, capsys) -> None:
    steps = tmp_path / "steps.tsv"
    steps.write_text("pytest\t0\t100\tok\nmolecule serving\t100\t200\tok\n")
    events = tmp_path / "events.jsonl"
    events.write_text(event("start", "vllm1", 120, VLLM) + "\n" + event("start", "node1", 101, OTHER) + "\n")
    cpu = tmp_path / "cpu.jsonl"
    cpu.write_text(
        "\n".join(
            [
                cpu_line(0, 1000, {}),
                cpu_line(100, 1150, {}),  # pytest: 150 core-seconds of 200, none in containers
                cpu_line(150, 1230, {"node1": 30, "vllm1": 20}),  # both started after the last sample
                "torn line",
                cpu_line(200, 1320, {"node1": 40, "vllm1": 80}),  # node1 +10, vllm1 +60
            ]
        )
    )
    samples = steps_table.read_cpu_samples(cpu.read_text().splitlines())
    vllm = steps_table.vllm_ids(events.read_text().splitlines())
    assert vllm == {"vllm1"}
    serving = steps_table.cpu_use(100, 200, samples, vllm)
    assert (serving.busy, serving.vllm, serving.nodes, serving.control) == (170, 80, 40, 50)
    assert steps_table.cpu_use(0, 100, samples, vllm).control == 150
    assert steps_table.cpu_use(10, 90, samples, vllm) is None  # no two samples within: no figure
    assert steps_table.main(["x", str(steps), str(events), str(cpu)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[-5:] == ["busy", "vLLM", "nodes", "control", "result"]
    # 150 of 2 cores x 100 s = 75 %; serving (a vLLM started): 170 s = 85 %, vLLM 80, nodes 40, control 50
    assert out[1].split()[2:] == ["100", "0", "150", "(", "75", "%)", "0", "0", "150", "ok"]
    assert out[2].split()[3:] == ["100", "1", "170", "(", "85", "%)", "80", "40", "50", "ok"]
    assert out[3].split()[3:6] == ["200", "1", "320"]  # all steps: 320 core-seconds over 200 s
