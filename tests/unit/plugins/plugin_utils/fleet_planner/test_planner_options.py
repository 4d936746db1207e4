"""The planner's option table and what is derived from it: the CLI, the plan report's command, the
`vllm serve` flags, the serving role's guard on extra_args, plan fields, and the merge of option layers."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.filter.vllm_fleet_plan_options import FilterModule
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report as pr
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import cli
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_planner import options as O
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError
from planner_helpers import H100, H200, config, gpu

ROOT = Path(__file__).resolve().parents[5]
CONFIGS = ROOT / "tests" / "data" / "model-configs"

# One valid value per option, as a user would write it in vllm_server_plan_options.
SAMPLES: dict[str, Any] = {
    "tensor_parallel_size": 2,
    "pipeline_parallel_size": 1,
    "max_model_len": "32k",
    "max_num_seqs": 64,
    "max_num_batched_tokens": 4096,
    "gpu_memory_utilization": 0.85,
    "dtype": "bfloat16",
    "kv_cache_dtype": "fp8",
    "quantization": "fp8",
    "enforce_eager": True,
    "kv_cache_memory_bytes": "8G",
    "block_size": 32,
    "language_model_only": True,
    "limit_mm_per_prompt": '{"image": 2, "video": 0}',
    "max_loras": 4,
    "max_lora_rank": 32,
    "vllm_version": "0.20.1",
    "vllm_image": "vllm/vllm-openai:v0.20.1",
    "target_context_len": 16384,
    "target_concurrency": 8,
    "workload": "batch",
    "sampler_backend": "flashinfer",
    "runner": "pooling",
    "convert": "embed",
    "speculative": '{"method": "ngram", "num_speculative_tokens": 4}',
    "speculative_draft_config": '{"model_type": "llama"}',
    "model_name": "org/model",
}
GPU = {"memory_mib": 81559, "count": 8, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"}


def test_samples_cover_the_table() -> None:
    assert set(SAMPLES) == set(O.OPTION_KEYS)


def test_names_flags_and_parsed_fields_are_unique_and_in_step() -> None:
    names = [o.name for o in O.OPTIONS]
    assert len(names) == len(set(names))
    assert len({o.cli_flag for o in O.OPTIONS}) == len(names)
    flags = [f for o in O.OPTIONS for f in o.vllm_flags]
    assert len(flags) == len(set(flags))
    assert [f.name for f in dataclasses.fields(O.PlanOptions)] == names
    assert fleet_planner.OPTION_KEYS == frozenset(names)
    assert all(o.help for o in O.OPTIONS)


def test_block_size_is_everywhere() -> None:
    opt = O.BY_NAME["block_size"]
    assert opt.cli_flag == "--block-size" and opt.vllm_flag == "--block-size" and opt.plan_field
    assert deploy.PLANNER_FLAGS["--block-size"] == "block_size"
    assert "block_size" in deploy.PLAN_FIELDS
    argv, missing = O.cli_arguments({}, {"block_size": 32})
    assert argv == ["--block-size", "32"] and missing == []


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_option_round_trips_through_the_cli(name: str) -> None:
    value = SAMPLES[name]
    argv, missing = O.cli_arguments(GPU, {name: value})
    assert missing == []
    ns = cli._parser().parse_args(["--model-config", "c.json", *argv])
    got = O.options_from_cli(ns)
    assert got == {name: value}
    assert O.gpu_from_cli(ns) == {**GPU, "nodes": 1, "shared": False}
    # the CLI's text reads as the filter's value does
    assert O.parse_options(got) == O.parse_options({name: value})


def test_all_options_at_once_round_trip_through_the_cli() -> None:
    argv, missing = O.cli_arguments({**GPU, "shared": True, "memory_reserved_mib": 512}, SAMPLES)
    assert missing == []
    ns = cli._parser().parse_args(["--model-config", "c.json", *argv])
    assert O.options_from_cli(ns) == SAMPLES
    assert O.gpu_from_cli(ns) == {**GPU, "nodes": 1, "shared": True, "memory_reserved_mib": 512}


def test_false_booleans_are_left_off_the_command_line() -> None:
    argv, _ = O.cli_arguments({}, {"enforce_eager": False, "language_model_only": False, "dtype": None})
    assert argv == []


def test_block_size_through_the_real_cli() -> None:
    proc = subprocess.run(
        [
            str(ROOT / "bin" / "vllm-fleet-plan"),
            "--model-config",
            str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B" / "config.json"),
            "--gpu-memory-mib",
            "81559",
            "--gpus-per-node",
            "1",
            "--block-size",
            "32",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["block_size"] == 32
    args = out["vllm_args"]
    assert args[args.index("--block-size") + 1] == "32"


def test_every_plan_field_maps_to_a_vllm_flag_and_a_plan_key() -> None:
    plan = fleet_planner.plan(config("meta-llama__Meta-Llama-3.1-8B"), gpu(H100, count=1))
    for name in O.plan_fields():
        assert O.BY_NAME[name].vllm_flag, name
        assert name in plan, name


def test_every_vllm_flag_of_the_table_is_emitted_in_table_order() -> None:
    # each launch option set, on a multimodal model across two nodes of a release with --language-model-only
    launch = {
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 2,
        "max_model_len": 8192,
        "max_num_seqs": 32,
        "max_num_batched_tokens": 4096,
        "gpu_memory_utilization": 0.8,
        "dtype": "bfloat16",
        "kv_cache_dtype": "fp8",
        "quantization": "fp8",
        "enforce_eager": True,
        "kv_cache_memory_bytes": "4G",
        "block_size": 32,
        "language_model_only": True,
        "limit_mm_per_prompt": '{"image": 2, "video": 0}',
        "max_loras": 2,
        "max_lora_rank": 16,
    }
    assert set(launch) == {o.name for o in O.OPTIONS if o.vllm_flag}
    plan = fleet_planner.plan(
        config("Qwen__Qwen3-VL-8B-Instruct"),
        gpu(H200, count=4, nodes=2),
        options={**launch, "vllm_version": "0.34.0"},
    )
    assert plan["feasible"], plan["errors"]
    flags = [a for a in plan["vllm_args"] if a.startswith("--")]
    # LoRA slots also switch LoRA on, last
    assert flags == [o.vllm_flag for o in O.OPTIONS if o.vllm_flag] + ["--enable-lora"]
    args = plan["vllm_args"]
    assert args[args.index("--block-size") + 1] == "32"
    assert args[args.index("--kv-cache-memory-bytes") + 1] == str(4 * 2**30)
    assert all(flag in deploy.PLANNER_FLAGS for flag in flags)  # extra_args cannot set any of them


def test_vllm_arguments_formats_values() -> None:
    values = {"max_model_len": "4096", "enforce_eager": True, "language_model_only": False, "workload": "x"}
    assert O.vllm_arguments(values) == ["--max-model-len", "4096", "--enforce-eager"]


@pytest.mark.parametrize(("flag", "option"), sorted(O.vllm_flag_owners().items()))
def test_extra_args_cannot_set_a_planner_flag(flag: str, option: str) -> None:
    with pytest.raises(ServingError) as err:
        deploy.vllm_command("/m", "m", "10.0.0.5", 8000, [], [flag, "1"])
    assert f"overrides.{option}" in str(err.value)


def test_unknown_option_message_lists_the_table() -> None:
    with pytest.raises(fleet_planner.PlanInputError) as err:
        O.parse_options({"bogus": 1})
    assert ", ".join(sorted(O.OPTION_KEYS)) in str(err.value)


@pytest.mark.parametrize(
    ("options", "field", "value"),
    [
        ({"max_model_len": "32K"}, "max_model_len", 32768),
        ({"max_model_len": "auto"}, "max_model_len", None),
        ({"max_model_len": -1}, "max_model_len", None),
        ({"kv_cache_memory_bytes": "8g"}, "kv_cache_memory_bytes", 8 * 10**9),
        ({"enforce_eager": "yes"}, "enforce_eager", True),
        ({"dtype": "auto"}, "dtype", None),
        ({"dtype": "bf16"}, "dtype", "bfloat16"),
        ({"kv_cache_dtype": " FP8 "}, "kv_cache_dtype", "fp8"),
        ({}, "workload", "chat"),
        ({"block_size": "16"}, "block_size", 16),
        ({"model_name": ""}, "model_name", None),
    ],
)
def test_parsers(options: dict, field: str, value: Any) -> None:
    assert getattr(O.parse_options(options), field) == value


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"block_size": "x"}, "block_size: expected an integer"),
        ({"block_size": 0}, "block_size: must be >= 1"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization: must be in (0, 1]"),
        ({"workload": "x"}, "workload: expected one of chat, batch"),
        ({"sampler_backend": "sort"}, "sampler_backend: expected one of auto, flashinfer, pytorch"),
        ({"kv_cache_dtype": "int4"}, "kv_cache_dtype: expected one of"),
        ({"language_model_only": "maybe"}, "language_model_only: expected true/false"),
    ],
)
def test_parser_errors_name_the_option(options: dict, needle: str) -> None:
    with pytest.raises(fleet_planner.PlanInputError) as err:
        O.parse_options(options)
    assert needle in str(err.value)


# --- the merge of option layers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("0.32.0", None, None), {"vllm_version": "0.32.0"}),
        (("0.32.0", {"vllm_version": "0.20.1"}, None), {"vllm_version": "0.20.1"}),
        (
            ("0.32.0", {"workload": "chat", "max_model_len": 8192}, {"max_model_len": 4096}),
            {"vllm_version": "0.32.0", "workload": "chat", "max_model_len": 4096},
        ),
        # a model unsets a group option with null
        (("0.32.0", {"max_model_len": 8192}, {"max_model_len": None}), {"vllm_version": "0.32.0"}),
        (("", {}, {}), {}),
        ((None, {"block_size": 32}, {}, "m"), {"block_size": 32, "model_name": "m"}),
        (("0.32.0", {}, {"model_name": "x"}, "m"), {"vllm_version": "0.32.0", "model_name": "x"}),
    ],
)
def test_merge_plan_options(args: tuple, expected: dict) -> None:
    assert O.merge_plan_options(*args) == expected
    assert FilterModule().filters()["vllm_fleet_plan_options"](*args) == expected


def test_merge_rejects_a_layer_that_is_not_a_mapping() -> None:
    with pytest.raises(AnsibleFilterError, match="vllm_fleet_plan_options: plan options: expected a mapping"):
        FilterModule().filters()["vllm_fleet_plan_options"]("0.32.0", ["tp"], {})


def test_plan_report_and_doctor_plan_the_same_options() -> None:
    group = {"workload": "batch", "max_model_len": 8192, "enforce_eager": None}
    overrides = {"max_model_len": 4096, "block_size": 32}
    expected = O.merge_plan_options("0.20.1", group, overrides, "m")

    entries = pr.normalize_entries(
        None,
        {"lab": ["h1"]},
        {
            "h1": {
                "vllm_server_vllm_version": "0.20.1",
                "vllm_server_plan_options": group,
                "vllm_server_models": [{"name": "m", "path": "/srv/m", "overrides": overrides}],
            }
        },
        {"config_dir": "/c"},
    )
    assert entries[0]["options"] == expected

    seen: list[dict] = []

    def planner(config: Any, gpu: Any, options: dict, inputs: dict) -> dict:
        seen.append(options)
        return {"feasible": True}

    rec = {
        "vllm_version": "0.20.1",
        "plan_options": group,
        "gpu": {"present": True},
        "probe": {"model_dirs": {"m": {"config": {"model_type": "llama"}}}},
    }
    doctor.plans.plan_for(rec, {"name": "m", "overrides": overrides}, planner)
    assert seen == [expected]


def test_filter_doc_lists_every_option() -> None:
    doc = yaml.safe_load((ROOT / "plugins" / "filter" / "vllm_fleet_plan_options.yml").read_text())
    text = " ".join(doc["DOCUMENTATION"]["description"])
    for name in O.OPTION_KEYS:
        assert f"C({name})" in text, name


def test_gpu_without_p2p_round_trips_through_the_cli_flags() -> None:
    argv, _ = O.cli_arguments(dict(GPU, p2p=False), {})
    assert O.NO_P2P_FLAG in argv
    assert O.NO_P2P_FLAG not in O.cli_arguments(GPU, {})[0]
    parser = argparse.ArgumentParser()
    O.add_cli_arguments(parser)
    assert O.gpu_from_cli(parser.parse_args(argv))["p2p"] is False
    assert "p2p" not in O.gpu_from_cli(parser.parse_args(O.cli_arguments(GPU, {})[0]))
