"""bin/vllm-fleet-plan: the command-line contract (exit codes, JSON keys, table output)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[5]
CLI = ROOT / "bin" / "vllm-fleet-plan"
CONFIGS = ROOT / "tests" / "data" / "model-configs"
CONTRACT_KEYS = {
    "feasible",
    "errors",
    "warnings",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "dtype",
    "kv_cache_dtype",
    "per_gpu",
    "kv_bytes_per_token",
    "kv_cache_tokens",
    "max_concurrency",
    "vllm_args",
}
PER_GPU_KEYS = {
    "total_bytes",
    "weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "cuda_graph_reserved_bytes",
    "kv_cache_bytes",
}
H100 = ["--gpu-memory-mib", "81559", "--gpu-name", "NVIDIA H100 80GB HBM3", "--compute-capability", "9.0"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # plain python3 from a checkout, no install, no project packages on the path
    return subprocess.run(
        [str(CLI), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
    )


def cfg(name: str) -> str:
    return str(CONFIGS / name / "config.json")


def test_feasible_plan_exit_0_with_contract_keys() -> None:
    proc = run("--model-config", cfg("meta-llama__Meta-Llama-3.1-70B"), *H100, "--gpus-per-node", "8")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert CONTRACT_KEYS <= set(out) and PER_GPU_KEYS == set(out["per_gpu"])
    assert out["feasible"] is True and out["tensor_parallel_size"] == 4
    assert out["vllm_args"][:2] == ["--tensor-parallel-size", "4"]
    assert out["model"] == "Meta-Llama-3.1-70B"  # name taken from the config folder, org dropped


def test_infeasible_plan_exit_2_still_prints_json() -> None:
    proc = run("--model-config", cfg("meta-llama__Meta-Llama-3.1-70B"), *H100, "--gpus-per-node", "1")
    assert proc.returncode == 2
    out = json.loads(proc.stdout)
    assert out["feasible"] is False and out["errors"][0].startswith("tensor_parallel_size: ")


def test_rejected_override_exit_2_with_vllm_wording() -> None:
    proc = run(
        "--model-config",
        cfg("Qwen__Qwen2.5-7B"),
        *H100,
        "--gpus-per-node",
        "8",
        "--tensor-parallel-size",
        "8",
    )
    assert proc.returncode == 2
    assert (
        "Total number of attention heads (28) must be divisible by tensor parallel size (8)." in proc.stdout
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--model-config", "/nonexistent/config.json", "--gpu-memory-mib", "81559", "--gpus-per-node", "1"],
        ["--gpu-memory-mib", "81559", "--gpus-per-node", "1"],
        ["--model-config", str(CONFIGS / "SOURCES.md"), "--gpu-memory-mib", "81559", "--gpus-per-node", "1"],
        [
            "--model-config",
            str(CONFIGS / "Qwen__Qwen3-8B" / "config.json"),
            "--gpu-memory-mib",
            "81559",
            "--gpus-per-node",
            "0",
        ],
        [
            "--model-config",
            str(CONFIGS / "Qwen__Qwen3-8B" / "config.json"),
            "--gpu-memory-mib",
            "81559",
            "--gpus-per-node",
            "1",
            "--vllm-version",
            "latest",
        ],
    ],
)
def test_bad_input_exit_1_one_line(args: list[str]) -> None:
    proc = run(*args)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-fleet-plan: error: ")


def test_table_format() -> None:
    proc = run(
        "--model-config",
        cfg("Qwen__Qwen3-8B"),
        *H100,
        "--gpus-per-node",
        "1",
        "--format",
        "table",
        "--vllm-version",
        "0.20.1",
        "--max-model-len",
        "32768",
    )
    assert proc.returncode == 0
    rows = {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in proc.stdout.splitlines()}
    assert rows["max_model_len"] == "32768"
    assert rows["KV bytes per token"] == "147,456"
    # the two sets of figures are named apart: the recommendation, and vLLM with only the given args
    assert rows["RECOMMENDED LAUNCH"].startswith("the plan's own figures")
    assert rows["vllm serve args (recommended)"].startswith("--tensor-parallel-size 1")
    assert rows["vLLM with only the given args (NOT the plan)"].startswith("max_model_len 32,768")


def test_json_names_the_recommendation_and_vllms_own_figures_apart() -> None:
    proc = run(
        "--model-config", cfg("Qwen__Qwen3-8B"), *H100, "--gpus-per-node", "1", "--vllm-version", "0.34.0"
    )
    result = json.loads(proc.stdout)
    rec, own = result["recommended_launch"], result["vllm_with_given_args"]
    assert rec["max_num_seqs"] == result["max_num_seqs"] and rec["vllm_args"] == result["vllm_args"]
    assert "recommends" in rec["what"] and own["what"].startswith("NOT the recommendation")
    assert result["vllm_defaults"] == own  # the former key, for older readers
    assert own["max_num_seqs"] != rec["max_num_seqs"]


def test_modelopt_hf_quant_config_beside_config_is_read() -> None:
    proc = run(
        "--model-config",
        cfg("nvidia__Llama-3.1-70B-Instruct-FP8"),
        *H100,
        "--gpus-per-node",
        "2",
        "--vllm-version",
        "0.20.1",
    )
    out = json.loads(proc.stdout)
    assert out["quantization"] == "modelopt" and out["kv_cache_dtype"] == "fp8"


def test_weights_bytes_and_index_are_exclusive() -> None:
    proc = run(
        "--model-config",
        cfg("Qwen__Qwen3-8B"),
        *H100,
        "--gpus-per-node",
        "1",
        "--weights-bytes",
        "10",
        "--safetensors-index",
        cfg("Qwen__Qwen3-8B"),
    )
    assert proc.returncode == 1


def test_safetensors_file_header_is_read(tmp_path: Path) -> None:
    header = json.dumps(
        {
            "model.embed_tokens.weight": {
                "dtype": "BF16",
                "shape": [151936, 4096],
                "data_offsets": [0, 151936 * 4096 * 2],
            }
        }
    ).encode()
    st = tmp_path / "model.safetensors"
    st.write_bytes(len(header).to_bytes(8, "little") + header)
    proc = run(
        "--model-config", cfg("Qwen__Qwen3-8B"), *H100, "--gpus-per-node", "1", "--safetensors-index", str(st)
    )
    assert json.loads(proc.stdout)["weights_source"] == "safetensors headers"
