"""Plan report logic: entries, planner command, plan vs actual (with the serving role's real fact), table."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import plan_report as pr
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import deploy

ROOT = Path(__file__).resolve().parents[5]
CONFIGS = ROOT / "tests" / "data" / "model-configs"
GIB = 1024**3

H100_FACTS = {
    "present": True,
    "state": "ok",
    "count": 8,
    "models": {"NVIDIA H100 80GB HBM3": 8},
    "gpus": [
        {
            "index": i,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_mib": 81559,
            "compute_capability": "9.0",
            "mig_mode": "disabled",
        }
        for i in range(8)
    ],
}


def real_plan(config, gpu, options, index, weights_bytes):
    return fleet_planner.plan(
        config, gpu, options=options, safetensors_index=index, weights_bytes=weights_bytes
    )


def real_spec(facts, nodes, shared):
    return fleet_planner.gpu_spec_from_facts(facts, nodes=nodes, shared=shared)


def llama8b() -> dict:
    return json.loads((CONFIGS / "meta-llama__Meta-Llama-3.1-8B" / "config.json").read_text())


# --- the equivalent planner command -----------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "index", "weights", "expected_tail", "missing"),
    [
        ({}, None, None, [], []),
        (
            {"tensor_parallel_size": 2, "enforce_eager": True},
            None,
            None,
            ["--enforce-eager", "--tensor-parallel-size", "2"],
            [],
        ),
        ({"enforce_eager": False, "max_model_len": "auto"}, None, None, ["--max-model-len", "auto"], []),
        (
            {"block_size": 32, "workload": "batch"},
            None,
            None,
            ["--block-size", "32", "--workload", "batch"],
            [],
        ),
        ({"no_such_option": 1, "workload": "batch"}, None, None, ["--workload", "batch"], ["no_such_option"]),
        ({}, "/x/index.json", 123, [], []),  # the index wins over weights_bytes
        ({}, None, 15_000_000_000, [], []),
    ],
)
def test_planner_command(options, index, weights, expected_tail, missing):
    gpu = {
        "memory_mib": 81559,
        "count": 8,
        "nodes": 1,
        "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "shared": True,
    }
    cmd, left_out = pr.planner_command(gpu, options, "/c/config.json", index, weights)
    assert cmd[:3] == ["bin/vllm-fleet-plan", "--model-config", "/c/config.json"]
    assert cmd[-2:] == ["--format", "json"]
    assert cmd[cmd.index("--gpu-name") + 1] == "NVIDIA H100 80GB HBM3"  # one argv item, spaces kept
    assert "--shared-gpu" in cmd
    body = cmd[cmd.index("--shared-gpu") + 1 : -2]
    assert body == expected_tail
    assert left_out == missing
    assert ("--safetensors-index" in cmd) == bool(index)
    assert ("--weights-bytes" in cmd) == bool(weights and not index)


@pytest.mark.parametrize(
    ("predicted", "actual", "expected"),
    [
        (110, 100, 10.0),
        (90, 100, -10.0),
        (100, 0, None),
        (None, 5, None),
        (5, None, None),
        (True, 1, None),
        (3.5, 4.0, -12.5),
    ],
)
def test_relative_error(predicted, actual, expected):
    assert pr.relative_error(predicted, actual) == expected


def test_an_error_within_the_logs_rounding_is_none():
    # vLLM logs "0.06 GiB" for a 64 MiB KV cache: the exact prediction is 0.0625 GiB
    assert pr.relative_error(0.0625, 0.06, 0.005) == 0.0
    assert pr.relative_error(0.07, 0.06, 0.005) == pytest.approx(16.67)
    rows = pr.compare(None, {"kv_cache_bytes": 64 * 2**20}, {"kv_cache_gib": 0.06})
    assert rows[0]["figure"] == "KV cache GiB/GPU" and rows[0]["error_pct"] == 0.0


def test_compare_prefers_the_deployed_plan_and_scales_gib():
    plan = {
        "kv_cache_tokens": 1000,
        "max_concurrency": 2.0,
        "per_gpu": {"kv_cache_bytes": 2 * GIB, "weights_bytes": 4 * GIB},
    }
    deployed = {"kv_cache_tokens": 900}
    actual = {"kv_cache_tokens": 1000, "max_concurrency": 2.5, "kv_cache_gib": 1.6, "weights_gib": 4.0}
    rows = {r["key"]: r for r in pr.compare(plan, deployed, actual)}
    assert rows["kv_cache_tokens"] == {
        "figure": "KV cache tokens",
        "key": "kv_cache_tokens",
        "predicted": 900,
        "actual": 1000,
        "error_pct": -10.0,
        "predicted_from": "deployed plan",
    }
    assert rows["max_concurrency"]["predicted_from"] == "plan now"
    assert rows["max_concurrency"]["error_pct"] == -20.0
    assert rows["kv_cache_bytes"]["actual"] == round(1.6 * GIB)
    assert rows["kv_cache_bytes"]["error_pct"] == 25.0
    assert rows["weights_bytes"]["error_pct"] == 0.0
    assert "max_model_len" not in rows  # vLLM printed none: no row


# --- entries ----------------------------------------------------------------------------------

GROUPS = {"h100_nodes": ["h1", "h2"], "lab": ["l1"]}
HOSTVARS = {
    "h1": {
        "vllm_server_vllm_version": "0.30.0",
        "vllm_server_plan_options": {"workload": "batch", "dtype": "auto"},
        "vllm_server_models": [
            {"name": "m1", "path": "/srv/models/o/m1/r", "overrides": {"max_model_len": 4096}, "gpus": [0, 1]}
        ],
        "model_weights_root": "/data/models",
        "model_weights_writer_host": "storage1",
    },
    "h2": {"vllm_server_models": [{"name": "m1", "path": "/other"}, {"name": "m2", "path": "/srv/m2"}]},
    "l1": {},
}


@pytest.mark.parametrize(
    ("model", "expect"),
    [
        (
            {
                "name": "a",
                "group": "h100_nodes",
                "config": "files/a/config.json",
                "safetensors_index": "/abs/i.json",
            },
            {
                "config_path": "/inv/files/a/config.json",
                "index_path": "/abs/i.json",
                "read_host": None,
                "error": None,
            },
        ),
        (
            {"name": "a", "group": "h100_nodes", "model_path": "/srv/a/"},
            {"read_host": "h1", "read_dir": "/srv/a", "config_path": None},
        ),
        (
            {"name": "a", "group": "h100_nodes", "repo_id": "org/a", "revision": "abc"},
            {"read_host": "storage1", "read_dir": "/data/models/org/a/abc"},
        ),
        (
            {"name": "a", "group": "lab", "repo_id": "org/a", "revision": "abc"},
            {"read_host": "l1", "read_dir": "/srv/models/org/a/abc"},
        ),
        ({"name": "a", "group": "h100_nodes"}, {"error": "has no model metadata: set config"}),
        (
            {"name": "a", "group": "nope", "config": "c"},
            {"error": "group nope has no hosts in this inventory"},
        ),
        ({"name": "a", "group": "lab", "config": "c", "tp": 2}, {"error": "unknown keys tp"}),
        ({"group": "lab", "config": "c"}, {"error": "needs name and group"}),
    ],
)
def test_normalize_entries_sources(model, expect):
    (entry,) = pr.normalize_entries(
        [model], GROUPS, HOSTVARS, {"config_dir": "/inv", "vllm_version": "0.32.0"}
    )
    for key, value in expect.items():
        if key == "error" and value:
            assert value in entry["error"]
        else:
            assert entry[key] == value, key


def test_normalize_entries_options_precedence():
    models = [
        {"name": "a", "group": "h100_nodes", "config": "c", "options": {"dtype": "bfloat16"}},
        {"name": "b", "group": "lab", "config": "c", "options": {"model_name": "custom"}},
    ]
    a, b = pr.normalize_entries(models, GROUPS, HOSTVARS, {"config_dir": "/", "vllm_version": "0.32.0"})
    # the group's vllm_server settings, then the entry's options; model_name from the entry name
    assert a["options"] == {
        "vllm_version": "0.30.0",
        "workload": "batch",
        "dtype": "bfloat16",
        "model_name": "a",
    }
    assert b["options"] == {"vllm_version": "0.32.0", "model_name": "custom"}


def test_normalize_entries_default_to_what_each_group_serves():
    entries = pr.normalize_entries([], GROUPS, HOSTVARS, {"config_dir": "/", "vllm_version": "0.32.0"})
    assert [(e["group"], e["name"], e["read_host"], e["read_dir"], e["gpu_count"]) for e in entries] == [
        ("h100_nodes", "m1", "h1", "/srv/models/o/m1/r", 2),  # the first host's entry wins
        ("h100_nodes", "m2", "h1", "/srv/m2", None),
    ]
    assert entries[0]["options"]["max_model_len"] == 4096


@pytest.mark.parametrize(
    ("files", "error", "quant_merged"),
    [
        (
            {"config": json.dumps({"model_type": "llama"}), "hf_quant_config": json.dumps({"q": 1})},
            None,
            True,
        ),
        (
            {"config": json.dumps({"quantization_config": {}}), "hf_quant_config": json.dumps({"q": 1})},
            None,
            False,
        ),
        ({"config": "", "error": "no such file"}, "cannot read /c/config.json: no such file", False),
        ({"config": "{broken"}, "not valid JSON", False),
    ],
)
def test_attach_inputs(files, error, quant_merged):
    entry = {
        "name": "a",
        "group": "g",
        "hosts": ["h"],
        "config_path": "/c/config.json",
        "index_path": "/c/i.json",
        "options": {},
        "error": None,
    }
    (item,) = pr.attach_inputs([entry], {"0": files}, {"h": {"present": True}}, {"h": None}, "cache")
    if error:
        assert error in item["error"]
        return
    assert item["error"] is None
    assert ("hf_quant_config" in item["config"]) == quant_merged
    assert item["index_path"] is None  # no index text was read: the command must not name one
    assert item["facts"] == {"h": {"present": True}} and item["facts_source"] == "cache"


# --- building entries with the real planner -------------------------------------------------


def entry(**kw):
    base = {
        "group": "h100_nodes",
        "model": "llama",
        "hosts": ["h1", "h2"],
        "facts": {"h1": H100_FACTS, "h2": H100_FACTS},
        "facts_source": "live",
        "config": llama8b(),
        "config_path": "/c/config.json",
        "options": {"model_name": "llama", "vllm_version": "0.32.0"},
        "deployed": {},
    }
    base.update(kw)
    return base


def test_build_entry_is_the_planner_output():
    out = pr.build_entry(entry(), real_plan, real_spec)
    expected = fleet_planner.plan(
        llama8b(),
        fleet_planner.gpu_spec_from_facts(H100_FACTS),
        options={"model_name": "llama", "vllm_version": "0.32.0"},
    )
    assert out["plan"] == expected
    assert out["error"] is None and out["facts_host"] == "h1"
    assert out["command"][out["command"].index("--gpus-per-node") + 1] == "8"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (
            {"facts": {"h1": None, "h2": {"present": False, "state": "no_driver"}}},
            "no GPU facts for any host of h100_nodes (no facts, no_driver)",
        ),
        ({"config": None}, "no config.json"),
        (
            {"options": {"tensor_parallel_size": 3}},
            None,
        ),  # infeasible is a plan with errors, not an input error
        ({"options": {"no_such_option": 1}}, "unknown key(s) no_such_option"),
    ],
)
def test_build_entry_errors(kw, message):
    out = pr.build_entry(entry(**kw), real_plan, real_spec)
    if message is None:
        assert out["plan"]["feasible"] is False and out["plan"]["errors"]
    else:
        assert message in out["error"] and out["plan"] is None


def test_build_entry_notes_hosts_with_different_gpus_and_honours_gpu_count():
    other = dict(H100_FACTS, models={"NVIDIA A100-SXM4-80GB": 8})
    out = pr.build_entry(entry(facts={"h1": H100_FACTS, "h2": other}, gpu_count=2), real_plan, real_spec)
    assert any("differ in GPUs" in n for n in out["notes"])
    assert out["gpu"]["count"] == 2
    assert out["command"][out["command"].index("--gpus-per-node") + 1] == "2"


def test_plan_vs_actual_with_the_serving_role_fact():
    """The deployment fact as the vllm_server role writes it (its own functions), with a real vLLM log."""
    log = (ROOT / "tests" / "data" / "vllm-logs" / "cpu-0.32.0-tiny.log").read_text()
    actual = vllm_log.parse_kv_cache(log)
    assert actual["kv_cache_tokens"] > 0
    plan = real_plan(llama8b(), real_spec(H100_FACTS, 1, False), {"model_name": "llama"}, None, None)
    summary = deploy.plan_summary(plan)
    record = {"args_hash": "x", "image": "img", "plan": summary, "actual": actual}
    fact = deploy.update_deployments({}, {"llama": record}, "2026-01-01T00:00:00Z")
    out = pr.build_entry(entry(deployed={"h1": fact, "h2": None}), real_plan, real_spec)
    (dep,) = out["deployments"]
    assert dep["host"] == "h1" and dep["deployed_at"] == "2026-01-01T00:00:00Z"
    rows = {r["key"]: r for r in dep["comparison"]}
    assert rows["kv_cache_tokens"]["actual"] == actual["kv_cache_tokens"]
    assert rows["kv_cache_tokens"]["predicted"] == summary["kv_cache_tokens"]
    assert rows["kv_cache_tokens"]["error_pct"] == pr.relative_error(
        summary["kv_cache_tokens"], actual["kv_cache_tokens"]
    )
    report = pr.build_report([entry(deployed={"h1": fact})], real_plan, real_spec)
    assert report["summary"]["deployments_compared"] == 1
    text = pr.render(report)
    assert "Plan vs actual" in text
    line = next(x for x in text.splitlines() if "KV cache tokens" in x)
    assert f"{rows['kv_cache_tokens']['error_pct']:+.1f}%" in line


def test_render_lists_errors_and_the_summary():
    report = pr.build_report(
        [
            entry(),
            entry(model="broken", facts={"h1": None, "h2": None}),
            entry(model="big", options={"tensor_parallel_size": 3, "model_name": "big"}),
        ],
        real_plan,
        real_spec,
    )
    text = pr.render(report)
    lines = text.splitlines()
    assert lines[1].split() == [
        "GROUP",
        "MODEL",
        "GPUS",
        "TP",
        "PP",
        "MAX_LEN",
        "SEQS",
        "GMU",
        "WEIGHTS",
        "KV",
        "KV",
        "TOKENS",
        "CONC",
        "STATUS",
    ]
    row = next(x for x in lines if x.startswith("h100_nodes") and " llama " in x)
    assert "8x NVIDIA H100 80GB HBM3 (80 GiB)" in row and row.rstrip().endswith("ok")
    assert any(x.startswith("ERROR h100_nodes/broken: no GPU facts") for x in lines)
    assert any(x.startswith("ERROR h100_nodes/big:") for x in lines)
    assert (
        next(x for x in lines if x.startswith("h100_nodes") and " big " in x).rstrip().endswith("INFEASIBLE")
    )
    assert (
        lines[-1]
        == "3 planned: 1 feasible, 1 infeasible, 1 without a plan; 0 deployments compared with vLLM's figures"
    )


def test_follow_refs_points_at_the_resolved_revision():
    (entry,) = pr.normalize_entries(
        [{"name": "a", "group": "h100_nodes", "repo_id": "org/a", "revision": "main"}],
        GROUPS,
        HOSTVARS,
        {"config_dir": "/", "vllm_version": "0.32.0"},
    )
    assert entry["read_ref"] == "/data/models/org/a/refs/main"
    answers = [{"item": entry, "content": base64.b64encode(b"0123abcd\n").decode()}]
    (followed,) = pr.follow_refs([entry], answers)
    assert followed["read_dir"] == "/data/models/org/a/0123abcd"
    assert (
        pr.follow_refs([entry], [{"item": entry, "failed": True}])[0]["read_dir"] == "/data/models/org/a/main"
    )
    bad = [{"item": entry, "content": base64.b64encode(b"../../etc").decode()}]
    assert pr.follow_refs([entry], bad)[0]["read_dir"] == "/data/models/org/a/main"


def test_weights_root_follows_the_fleet_models_root_when_the_host_sets_no_model_weights_root():
    """plan.yml reads the weights where model_weights writes them: the fleet-wide vllm_fleet_models_root
    (inventory) when no host sets model_weights_root, not a copy of the default."""
    hostvars = {"l1": {"vllm_fleet_models_root": "/data/fleet-models"}}
    (entry,) = pr.normalize_entries(
        [{"name": "a", "group": "lab", "repo_id": "org/a", "revision": "abc"}],
        {"lab": ["l1"]},
        hostvars,
        {"config_dir": "/inv", "vllm_version": "0.32.0"},
    )
    assert entry["read_dir"] == "/data/fleet-models/org/a/abc"
