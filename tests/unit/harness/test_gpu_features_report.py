"""tests/gpu/features_report.py reads what tests/gpu/features_034.py leaves in OUTDIR (#28): a hand-made
OUTDIR shaped as the script writes it (the log lines are vLLM 0.34.0's own formats) and the report's rows,
measured next to the collection's real predictions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpu import features_report as fr
from gpu.features_034 import FEATURES

GPU = Path(__file__).resolve().parents[2] / "gpu"
MIB = 1024**2


def _step(name: str, used_mib: int, **extra: Any) -> dict[str, Any]:
    return {
        "step": name,
        "smi_used_mib": used_mib,
        "smi_total_mib": 81559,
        "gpu": "NVIDIA H100 80GB HBM3",
        "MemTotal_bytes": 128 * 1024**3,
        "Shmem_bytes": 10 * MIB,
        "rss_bytes": 2 * 1024**3,
        **extra,
    }


def _counters(**values: float) -> list[dict[str, Any]]:
    out = []
    for key, v in values.items():
        name, _, source = key.partition("__")
        out.append({"name": f"vllm:{name}", "labels": {"source": source} if source else {}, "value": v})
    return out


def _write(outdir: Path, name: str, result: dict[str, Any], log: str) -> None:
    (outdir / f"{name}.json").write_text(json.dumps({"mode": FEATURES[name][0], "ok": True, **result}))
    (outdir / f"{name}.log").write_text(log + "\nEXIT 0 after 61.0s\n")


@pytest.fixture(name="outdir")
def _outdir(tmp_path: Path) -> Path:
    _write(
        tmp_path,
        "sleep",
        {
            "engine": {"kv_cache_size_tokens": 250_000},
            "level1": {"sleep_s": 1.2, "wake_s": 0.8, "same_tokens_as_before": True},
            "level2": {"sleep_s": 0.3, "wake_s": 0.5, "reload_s": 2.0, "same_tokens_as_before": True},
            "steps": [
                _step("before_import", 0),
                _step("awake_after_generate", 36_000),
                _step("asleep_1", 1_000, rss_bytes=2 * 1024**3 + 6 * 1024**3),
                _step("asleep_2", 1_100),
            ],
        },
        "INFO Model loading took 6.02 GiB memory and 3.1 seconds\n"
        "INFO Available KV cache memory: 28.4 GiB\n"
        "INFO GPU KV cache size: 250,000 tokens, Maximum concurrency for 4,096 tokens per request: 61.04x\n"
        "INFO Sleep mode freed 34.16 GiB memory, 0.98 GiB memory is still in use.\n"
        "INFO Sleep mode freed 34.06 GiB memory, 1.07 GiB memory is still in use.",
    )
    kv = {"prompts_per_round": 12, "prefix_tokens": 2048, "tail_tokens": 32, "gpu_cache_tokens": 9216}
    _write(
        tmp_path,
        "kv_offload",
        {
            "workload": kv,
            "round2_s": 0.6,
            "metrics": {
                "round1": _counters(prompt_tokens=24_960, prefix_cache_hits=0),
                "round2": _counters(
                    prompt_tokens=49_920,
                    prefix_cache_hits=0,
                    external_prefix_cache_hits=24_576,
                    prompt_tokens_cached_by_source__host=24_576,
                    prompt_tokens_cached_by_source__device=0,
                ),
            },
            "steps": [_step("before_start", 0), _step("awake", 20_000, Shmem_bytes=10 * MIB + 4 * 1024**3)],
        },
        "INFO Creating offloading spec with name: CPUOffloadingSpec\n"
        "INFO Created mmap file /dev/shm/vllm_offload_x.mmap (4.29 GB)",
    )
    _write(
        tmp_path,
        "kv_offload_off",
        {
            "workload": kv,
            "round2_s": 1.5,
            "metrics": {
                "round1": _counters(prompt_tokens=24_960, prefix_cache_hits=0),
                "round2": _counters(prompt_tokens=49_920, prefix_cache_hits=1_024),
            },
            "steps": [_step("awake", 20_000)],
        },
        "",
    )
    spec = {"name": "vllm:spec_decode_num_accepted_tokens_per_pos", "labels": {}, "values": [90, 80, 70]}
    _write(
        tmp_path,
        "ngram",
        {
            "engine": {"kv_cache_size_tokens": 250_000},
            "decode": {"tokens_per_s": 9000.0, "distinct_output_tokens": 3},
            "metrics": {
                "before": [],
                "after": [
                    *_counters(spec_decode_num_drafts=100, spec_decode_num_draft_tokens=300),
                    *_counters(spec_decode_num_accepted_tokens=240),
                    spec,
                ],
            },
            "steps": [_step("awake", 36_000)],
        },
        "INFO Model loading took 6.02 GiB memory and 3.0 seconds",
    )
    _write(
        tmp_path,
        "ngram_off",
        {
            "engine": {"kv_cache_size_tokens": 250_100},
            "decode": {"tokens_per_s": 4000.0},
            "steps": [_step("awake", 35_990)],
        },
        "INFO Model loading took 6.02 GiB memory and 3.0 seconds",
    )
    return tmp_path


def _rows(outdir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["feature"], r["figure"]): r for r in fr.report(outdir)}


def test_log_lines_as_vllm_034_writes_them() -> None:
    got = fr.parse_log(
        "INFO 12-06 gpu_worker.py:353] Sleep mode freed 34.16 GiB memory, 0.98 GiB memory is still in use.\n"
        "INFO kv_cache_utils.py:1169] GPU KV cache size: 605,312 tokens, Maximum concurrency for 4,096\n"
        "INFO extensible_kv_cache.py:536] Extended KV cache to 9458 blocks (64.66 GiB).\n"
        "EXIT timeout after 150.0s\n"
    )
    assert got["sleep_freed"] == [{"freed_gib": 34.16, "in_use_gib": 0.98}]
    assert got["gpu_kv_tokens"] == 605_312
    assert (got["extended_kv_blocks"], got["extended_kv_gib"]) == (9458, 64.66)
    assert got["exit"] == "timeout"


def test_sleep_measured_next_to_the_sleep_budget(outdir: Path) -> None:
    rows = _rows(outdir)
    freed = rows[("sleep", "level 1: GPU freed (nvidia-smi)")]
    # the fleet's budget for the sleeper: 0.45 of the H100 less what it keeps asleep, about 34.8 GiB
    assert 33 < freed["predicted"] < 36
    assert freed["measured"] == pytest.approx(35_000 / 1024, abs=0.001)
    assert freed["ratio"] == pytest.approx(freed["measured"] / freed["predicted"], rel=1e-3)
    assert rows[("sleep", "level 1: GPU freed (vLLM's log)")]["measured"] == 34.16
    assert rows[("sleep", "level 2: GPU freed (vLLM's log)")]["measured"] == 34.06
    weights = rows[("sleep", "weights (vLLM: Model loading took)")]
    assert weights["measured"] == 6.02 and 5.9 < weights["predicted"] < 6.1  # Llama-3.2-3B in bf16
    assert rows[("sleep", "level 1: host RAM taken asleep (RSS)")]["measured"] == 6.0
    vllm_held = rows[("sleep", "level 1: GPU freed vs vLLM's weights + KV")]
    assert vllm_held["predicted"] == pytest.approx(6.02 + 28.4) and vllm_held["measured"] == freed["measured"]
    assert rows[("sleep", "level 2: same tokens after wake")]["measured"] is True


def test_kv_tier_per_rank_and_round_two_hits(outdir: Path) -> None:
    rows = _rows(outdir)
    tier = rows[("kv_offload", "host tier per TP rank (vLLM's log)")]
    assert tier["predicted"] == 4.0 and tier["measured"] == pytest.approx(4.29e9 / 1024**3, abs=0.001)
    assert rows[("kv_offload", "host tier per TP rank (/dev/shm growth)")]["ratio"] == 1.0
    assert rows[("kv_offload", "vllm serve flags (fleet)")]["measured"] == (
        "--kv-offloading-backend native --kv-offloading-size 4"
    )
    host = rows[("kv_offload", "round 2: prompt tokens cached from host")]
    assert host["measured"] == host["predicted"] == 12 * 2048 and host["ratio"] == 1.0
    assert rows[("kv_offload", "round 2 hit rate with the tier")]["measured"] == pytest.approx(
        24_576 / 24_960, abs=1e-3
    )
    assert rows[("kv_offload", "round 2 hit rate without")]["measured"] == pytest.approx(
        1_024 / 24_960, abs=1e-3
    )


def test_ngram_adds_nothing_on_the_gpu_and_reads_acceptance(outdir: Path) -> None:
    rows = _rows(outdir)
    assert rows[("ngram", "drafter weights (Model loading took, on - off)")]["predicted"] == 0
    assert rows[("ngram", "draft acceptance rate")]["measured"] == 0.8
    assert rows[("ngram", "mean acceptance length")]["measured"] == 3.4
    assert "90,80,70" in rows[("ngram", "mean acceptance length")]["note"]
    assert rows[("ngram", "decode speed-up (tokens/s with / without)")]["measured"] == 2.25


def test_a_failed_feature_is_a_row_and_the_cli_prints_the_table(outdir: Path) -> None:
    (outdir / "ngram.json").write_text(json.dumps({"error": "ValueError: no ngram", "steps": []}))
    got = subprocess.run(
        [sys.executable, str(GPU / "features_report.py"), str(outdir)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "FAILED" in got and "ValueError: no ngram" in got
    assert "level 1: GPU freed (nvidia-smi)" in got and "round 2: prompt tokens cached from host" in got
    rows = json.loads(
        subprocess.run(
            [sys.executable, str(GPU / "features_report.py"), str(outdir), "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert {r["feature"] for r in rows} == {
        "sleep",
        "kv_offload",
        "ngram",
        "sleep_l2_real",
        "kv_ttft",
        "kv_ttft_off",
    }
    # a feature the folder has no result of is one row saying so
    absent = {r["feature"]: r for r in rows if r["feature"] in ("sleep_l2_real", "kv_ttft", "kv_ttft_off")}
    assert {(r["figure"], r["measured"]) for r in absent.values()} == {("run", "not run")}
    ran = {r["feature"]: r for r in rows if r["figure"] == "runs on a CUDA GPU (platform check)"}
    assert ran["sleep"]["measured"] == ran["sleep"]["predicted"] == "ran"
    assert (ran["ngram"]["measured"], ran["ngram"]["predicted"]) == ("failed", "ran")
    # the device command brings the folder back as one archive
    archive = outdir.parent / "features.tgz"
    subprocess.run(["tar", "czf", str(archive), "-C", str(outdir.parent), outdir.name], check=True)
    from_tgz = subprocess.run(
        [sys.executable, str(GPU / "features_report.py"), str(archive)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert from_tgz == got


def test_predictions_follow_the_args_the_run_was_given(outdir: Path) -> None:
    res = json.loads((outdir / "sleep.json").read_text())
    before = _rows(outdir)[("sleep", "GPU in use awake (nvidia-smi, less idle)")]["predicted"]
    res["args"] = {**FEATURES["sleep"][1], "gpu_memory_utilization": 0.3}  # as FEATURE_EXTRA would
    (outdir / "sleep.json").write_text(json.dumps(res))
    after = _rows(outdir)[("sleep", "GPU in use awake (nvidia-smi, less idle)")]["predicted"]
    assert after == pytest.approx(before * 0.3 / 0.45, rel=1e-3)
