"""The planner refuses what vLLM refuses: each bad input gets one message naming it, with the fix."""

from __future__ import annotations

import json

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import cli, plan
from planner_helpers import H100
from planner_refusal_cases import BAD_INPUT, CASES, CONFIGS, INFEASIBLE, Case, write_inputs


def test_the_table_covers_at_least_sixty_inputs() -> None:
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_named_with_its_fix(case: Case, tmp_path, capsys) -> None:
    rc = cli.main(write_inputs(case, tmp_path))
    out, err = capsys.readouterr()
    assert rc == case.rc, (rc, err or out)
    assert "internal error" not in err and "Traceback" not in err
    if case.rc == BAD_INPUT:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        prefix = f"vllm-fleet-plan: error: {case.input}"
        assert lines[0].startswith(prefix + ":") or lines[0].startswith(prefix + " "), lines[0]
        assert case.fix in lines[0].split("Fix:", 1)[1], lines[0]
    else:
        assert case.rc == INFEASIBLE
        result = json.loads(out)
        assert result["feasible"] is False and result["vllm_args"] == []
        named = [e for e in result["errors"] if e.startswith(f"{case.input}: ")]
        assert named, result["errors"]
        assert any(case.fix in e.split("Fix:", 1)[1] for e in named if "Fix:" in e), named


def test_an_unexpected_failure_is_one_line_naming_the_input(tmp_path, capsys, monkeypatch) -> None:
    def broken(*_args, **_kwargs):
        raise KeyError("layer_types")

    monkeypatch.setattr(cli, "plan", broken)
    argv = write_inputs(CASES[0], tmp_path)
    assert cli.main(argv) == cli.EXIT_BUG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "internal error (KeyError: 'layer_types')" in err[0]
    assert argv[1] in err[0]


REFUSAL_INPUTS = (
    "architectures:",
    "gpu.compute_capability:",
    "model_config.quantization_config.quant_method:",
    "quantization:",
    "kv_cache_dtype:",
)


def test_no_real_startup_is_refused() -> None:
    """The replayed vLLM startups (tests/accuracy/cases) ran: none of them may be refused."""
    import importlib.util
    from pathlib import Path

    run = Path(__file__).resolve().parents[4] / "accuracy" / "run.py"
    spec = importlib.util.spec_from_file_location("fleet_planner_accuracy_replay_refusals", run)
    assert spec is not None and spec.loader is not None
    replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay)
    cases = sorted((run.parent / "cases").glob("*.json"))
    assert cases
    for path in cases:
        result = replay.predict(replay.load_case(path))
        refused = [e for e in result["errors"] if e.startswith(REFUSAL_INPUTS)]
        assert not refused, (path.name, refused)


@pytest.mark.parametrize("model", sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").is_file()))
def test_published_configs_are_not_refused_on_the_newest_release(model: str) -> None:
    cfg = json.loads((CONFIGS / model / "config.json").read_text())
    result = plan(cfg, {**H100, "count": 8}, options={"vllm_version": "0.34.0"})
    assert not [e for e in result["errors"] if e.startswith(REFUSAL_INPUTS)], result["errors"]
