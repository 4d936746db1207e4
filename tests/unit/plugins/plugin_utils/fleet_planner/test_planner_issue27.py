"""Inputs a new user gets wrong (issue #27): what vLLM accepts is accepted, what it refuses is refused."""

from __future__ import annotations

import os

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import cli, plan
from planner_helpers import A100_40, CONFIGS, H100, T4, config, gpu


def _qwen3_yarn() -> dict:
    cfg = config("Qwen__Qwen3-8B")
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    return cfg


def test_a_fifo_model_config_is_refused_not_waited_on(tmp_path, capsys) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    argv = ["--model-config", str(fifo), "--gpu-memory-mib", "81559", "--gpus-per-node", "1"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert f"model-config: {fifo} is a FIFO, not a regular file. Fix: pass the path of the file" in err


@pytest.mark.parametrize(
    ("text", "tokens"), [("1M", 1 << 20), ("1m", 10**6), ("128K", 131072), ("25.6k", 25600)]
)
def test_max_model_len_is_read_as_vllm_reads_it(text: str, tokens: int) -> None:
    r = plan(
        config("meta-llama__Llama-4-Scout-17B-16E-Instruct"),
        gpu(H100, count=8),
        options={"vllm_version": "0.34.0", "max_model_len": text},
    )
    assert r["max_model_len"] == tokens
    assert not any(e.startswith("max_model_len") for e in r["errors"])


def test_yarn_extends_the_context_up_to_0_29_and_not_in_0_34() -> None:
    # vllm/config/model.py _get_and_verify_max_len: 0.27 sets original x factor for yarn; 0.31 and 0.34
    # take max_position_embeddings as already scaled
    old = plan(_qwen3_yarn(), gpu(H100, count=1), options={"vllm_version": "0.29.0", "max_model_len": "128K"})
    new = plan(_qwen3_yarn(), gpu(H100, count=1), options={"vllm_version": "0.34.0", "max_model_len": "128K"})
    assert old["feasible"] and old["max_model_len"] == 131072
    assert not new["feasible"]
    assert "Fix: set max_model_len <= 40960, or set max_position_embeddings to 131072" in new["errors"][0]


@pytest.mark.parametrize(
    ("version", "host", "kv", "refused"),
    [
        ("0.11.0", A100_40, "fp8", True),  # Triton: no fp8e4nv below SM 8.9
        ("0.11.0", A100_40, "fp8_e5m2", False),  # Triton compiles e5m2 there
        ("0.20.0", A100_40, "fp8", False),  # FlashInfer serves it
        ("0.34.0", A100_40, "fp8", False),
        ("0.34.0", T4, "fp8", True),  # FlashInfer's floor is SM 8.0 from 0.27: Triton refuses
        ("0.20.0", T4, "fp8", False),
        ("0.7.3", A100_40, "fp8", False),  # V0's CUDA cache kernels
    ],
)
def test_fp8_kv_cache_below_sm89(version: str, host: dict, kv: str, refused: bool) -> None:
    r = plan(
        config("Qwen__Qwen3-8B"), gpu(host, count=1), options={"vllm_version": version, "kv_cache_dtype": kv}
    )
    named = [e for e in r["errors"] if e.startswith("kv_cache_dtype:")]
    assert bool(named) is refused, named
    if refused:
        assert "Fix: set kv_cache_dtype" in named[0]


@pytest.mark.parametrize(
    ("text", "release", "reason"),
    [
        ("0.10", "0.10.0", "names no patch release"),
        ("0.19.0-cu128", "0.19.0", "carries the build suffix '-cu128'"),
        ("0.20.0rc1", "0.20.0", "is a pre-release (rc1)"),
    ],
)
def test_a_loose_version_text_says_which_release_it_planned(
    text: str, release: str, reason: str, capsys
) -> None:
    r = plan(config("Qwen__Qwen3-8B"), gpu(H100, count=1), options={"vllm_version": text})
    assert r["vllm_version"] == release
    warning = next(w for w in r["warnings"] if w.startswith(f"VLLM VERSION READ AS {release}:"))
    assert f"vllm_version {text!r} {reason}" in warning and "Fix: set vllm_version" in warning
    argv = ["--model-config", str(CONFIGS / "Qwen__Qwen3-8B" / "config.json"), "--gpu-memory-mib", "81559"]
    argv += ["--gpus-per-node", "1", "--gpu-name", "NVIDIA H100 80GB HBM3", "--vllm-version", text]
    cli.main([*argv, "--format", "table"])
    assert f"WARNING: VLLM VERSION READ AS {release}" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["0.11.2", "v0.11.0", "0.8.5.post1"])
def test_a_plain_release_reads_without_a_warning(text: str) -> None:
    r = plan(config("Qwen__Qwen3-8B"), gpu(H100, count=1), options={"vllm_version": text})
    assert not any(w.startswith("VLLM VERSION") for w in r["warnings"])
