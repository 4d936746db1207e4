"""Hosts where nvidia-smi -q does not answer, mixed hosts, MIG, warnings: real captures of public hosts.

tests/data/nvidia-smi/captures/<name>/ hold outputs other people posted (SOURCE.md names each);
the lab profiles gh200x1-table, p4000x1-inforom and h200x1-mig replay some of them.
Expected values are read off the capture files, not off the parser.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from nvidia_smi_profiles import PROFILES_DIR, STANDIN, capture, profile_names, run_module

CAPTURES = PROFILES_DIR / "captures"
BROKEN_Q = (2, "", "nvidia-smi: -q failed")  # any -q that prints no report


def read(name: str, file: str) -> str:
    return (CAPTURES / name / file).read_text()


def test_every_capture_names_its_source() -> None:
    names = sorted(p.name for p in CAPTURES.iterdir() if p.is_dir())
    assert len(names) >= 6
    for name in names:
        source = (CAPTURES / name / "SOURCE.md").read_text()
        assert "https://github.com/" in source, name


# --- the plain table ----------------------------------------------------------------------------

TABLE_AND_Q = [p for p in profile_names() if capture(p, "") is not None and capture(p, "-q") is not None]


@pytest.mark.parametrize("profile", TABLE_AND_Q)
def test_table_agrees_with_the_report_of_the_same_host(profile: str) -> None:
    """The table and -q of one host: same driver, CUDA, GPUs, bus ids, memory, persistence, MIG."""
    table = nvidia_smi.parse_table(capture(profile, "") or "")
    report = nvidia_smi.parse_query(capture(profile, "-q") or "")
    assert (table["driver_version"], table["cuda_version"]) == (
        report["driver_version"],
        report["cuda_version"],
    )
    keys = ("index", "pci_bus_id", "memory_total_mib", "persistence_mode", "mig_mode")
    assert [tuple(g[k] for k in keys) for g in table["gpus"]] == [
        tuple(g[k] for k in keys) for g in report["gpus"]
    ]
    for t, q in zip(table["gpus"], report["gpus"], strict=True):
        assert q["name"] == t["name"] or q["name"].startswith(t["name"].removesuffix("..."))
        mig = ("index", "gpu_instance_id", "compute_instance_id", "memory_total_mib", "multiprocessor_count")
        assert [tuple(d[k] for k in mig) for d in t["mig_devices"]] == [
            tuple(d[k] for k in mig) for d in q["mig_devices"]
        ]
    assert len(TABLE_AND_Q) >= 15


def test_table_only_host_with_corrupted_inforom() -> None:
    """Driver 384 (no CUDA version in the header), exit status 14 with the data, a warning line."""
    results = {"query": BROKEN_Q, "table": (14, read("quadro-p4000-inforom-table", "nvidia-smi.txt"), "")}
    facts = nvidia_smi.facts_from_results(results)
    assert (facts["present"], facts["state"], facts["source"], facts["error"]) == (True, "ok", "table", None)
    assert (facts["driver_version"], facts["cuda_version"], facts["count"]) == ("384.130", None, 1)
    (gpu,) = facts["gpus"]
    assert (gpu["name"], gpu["pci_bus_id"], gpu["memory_total_mib"], gpu["persistence_mode"]) == (
        "Quadro P4000",
        "00000000:B3:00.0",
        8105,
        False,
    )
    assert (gpu["compute_capability"], gpu["compute_capability_source"], gpu["uuid"]) == (
        "6.1",
        "product",
        None,
    )
    assert facts["warnings"] == ["infoROM is corrupted at gpu 0000:B3:00.0"]
    assert "nvidia-smi exited 14 but printed its report" in facts["notes"]
    assert "nvidia-smi -q exited 2: nvidia-smi: -q failed" in facts["notes"]
    assert facts["notes"][-1] == "GPUs read from nvidia-smi (the forms before it gave none)"


def test_mixed_table_host() -> None:
    facts = nvidia_smi.facts_from_results(
        {"query": BROKEN_Q, "table": (0, read("mixed-rtx-5gpu-table", "nvidia-smi.txt"), "")}
    )
    assert (facts["source"], facts["count"], facts["homogeneous"]) == ("table", 5, False)
    assert facts["models"] == {
        "NVIDIA GeForce RTX 2060": 1,
        "NVIDIA GeForce RTX 3060": 2,
        "NVIDIA GeForce RTX 3060 Ti": 1,
        "NVIDIA GeForce RTX 3070": 1,
    }
    assert [(g["memory_total_mib"], g["compute_capability"]) for g in facts["gpus"]] == [
        (6144, "7.5"),
        (12288, "8.6"),
        (12288, "8.6"),
        (8192, "8.6"),
        (8192, "8.6"),
    ]
    assert (facts["driver_version"], facts["cuda_version"]) == ("560.35.03", "12.6")


# --- -L only ----------------------------------------------------------------------------------


def test_list_only_mixed_host() -> None:
    """Only -L answers: names and UUIDs, no memory; the two models are reported per GPU."""
    results = {
        "query": BROKEN_Q,
        "query_gpu": (2, "", "failed"),
        "table": (2, "", "failed"),
        "list": (0, read("mixed-k80-2080ti-list", "nvidia-smi-L.txt"), ""),
    }
    facts = nvidia_smi.facts_from_results(results)
    assert (facts["present"], facts["source"], facts["count"], facts["homogeneous"]) == (
        True,
        "list",
        5,
        False,
    )
    assert facts["models"] == {"Tesla K80": 4, "GeForce RTX 2080 Ti": 1}
    assert [(g["index"], g["name"], g["compute_capability"]) for g in facts["gpus"]] == [
        (0, "Tesla K80", "3.7"),
        (1, "Tesla K80", "3.7"),
        (2, "GeForce RTX 2080 Ti", "7.5"),
        (3, "Tesla K80", "3.7"),
        (4, "Tesla K80", "3.7"),
    ]
    assert {g["memory_total_mib"] for g in facts["gpus"]} == {None}
    assert (facts["driver_version"], facts["cuda_version"]) == (None, None)
    assert facts["notes"][-1] == "GPUs read from nvidia-smi -L (the forms before it gave none)"


def test_nothing_answers_is_an_error_naming_the_first_failure() -> None:
    results = {"query": BROKEN_Q, "table": (2, "", "bad"), "list": (0, "", "")}
    facts = nvidia_smi.facts_from_results(results)
    assert (facts["present"], facts["state"], facts["source"]) == (False, "error", None)
    assert facts["error"] == "nvidia-smi -q exited 2: nvidia-smi: -q failed"


# --- Grace Hopper -------------------------------------------------------------------------------


def test_grace_hopper_table_only_host_through_the_module(tmp_path: Path) -> None:
    pytest.importorskip("ansible.module_utils.basic")
    facts = run_module(tmp_path, {"path": str(STANDIN)}, PROFILES_DIR / "gh200x1-table")["ansible_facts"][
        "nvidia_gpu"
    ]
    assert (facts["present"], facts["state"], facts["source"]) == (True, "ok", "table")
    assert (facts["driver_version"], facts["cuda_version"]) == ("570.124.06", "12.8")
    (gpu,) = facts["gpus"]
    assert (gpu["name"], gpu["memory_total_mib"], gpu["mig_mode"], gpu["pci_bus_id"]) == (
        "NVIDIA GH200 480GB",
        97871,
        "disabled",
        "00000000:DD:00.0",
    )
    assert (gpu["compute_capability"], gpu["compute_capability_source"], gpu["architecture"]) == (
        "9.0",
        "product",
        "Hopper",
    )
    assert "aarch64" in read("gh200-aarch64-table", "uname.txt")


@pytest.mark.parametrize(("profile", "source"), [("t4x1-xml", "query_xml"), ("p4000x1-inforom", "table")])
def test_module_falls_back_form_by_form(tmp_path: Path, profile: str, source: str) -> None:
    pytest.importorskip("ansible.module_utils.basic")
    facts = run_module(tmp_path, {"path": str(STANDIN)}, PROFILES_DIR / profile)["ansible_facts"][
        "nvidia_gpu"
    ]
    assert (facts["present"], facts["source"], facts["count"]) == (True, source, 1)
    assert any("nvidia-smi -q exited 2" in n for n in facts["notes"])


# --- the calls the module makes ------------------------------------------------------------------


def calls(answers: dict[str, tuple[int | None, str, str]], topology: bool = True) -> list[str]:
    results: dict[str, tuple[int | None, str, str]] = {}
    while (call := nvidia_smi.next_call(results, topology)) is not None:
        results[call[0]] = answers.get(call[0], (2, "", "not answered"))
    return list(results)


def test_calls_on_a_healthy_host() -> None:
    answers = {"query": (0, capture("h200x1", "-q") or "", "")}
    assert calls(answers) == ["query", "query_gpu", "topo", "nvlink"]
    assert calls(answers, topology=False) == ["query", "query_gpu"]


def test_calls_on_a_mig_host_add_the_list() -> None:
    assert calls({"query": (0, capture("h200x1-mig", "-q") or "", "")}) == [
        "query",
        "query_gpu",
        "list",
        "topo",
        "nvlink",
    ]


def test_calls_when_q_prints_no_report() -> None:
    assert calls({"query": BROKEN_Q}) == [
        "query",
        "query_xml",
        "query_gpu",
        "table",
        "list",
        "topo",
        "nvlink",
    ]


def test_calls_stop_at_a_host_failure_or_a_hung_q() -> None:
    mismatch = (PROFILES_DIR / "nvml-mismatch" / "nvidia-smi.out").read_text()
    assert calls({"query": (18, mismatch, "")}) == ["query"]
    assert calls({"query": (None, "", "")}) == ["query"]


# --- compute capability -----------------------------------------------------------------------


def test_compute_cap_from_the_query_with_the_table_as_fallback_on_old_drivers() -> None:
    """Drivers before 510 refuse a --query-gpu naming compute_cap; the module asks again without it."""
    q = (0, capture("h200x1", "-q") or "", "")
    csv_full = capture("h200x1", " ".join(nvidia_smi.QUERY_ARGS)) or ""
    at = nvidia_smi.QUERY_FIELDS.index("compute_cap")
    csv_legacy = "\n".join(
        ", ".join(c for i, c in enumerate(line.split(", ")) if i != at) for line in csv_full.splitlines()
    )
    refused = (2, 'Field "compute_cap" is not a valid field to query.\n', "")
    assert calls({"query": q, "query_gpu": refused}) == [
        "query",
        "query_gpu",
        "query_gpu_legacy",
        "topo",
        "nvlink",
    ]
    old = nvidia_smi.facts_from_results(
        {"query": q, "query_gpu": refused, "query_gpu_legacy": (0, csv_legacy, "")}
    )
    new = nvidia_smi.facts_from_results({"query": q, "query_gpu": (0, csv_full, "")})
    assert (new["gpus"][0]["compute_capability"], new["gpus"][0]["compute_capability_source"]) == (
        "9.0",
        "nvidia-smi",
    )
    assert (old["gpus"][0]["compute_capability"], old["gpus"][0]["compute_capability_source"]) == (
        "9.0",
        "product",
    )
    assert any("does not know compute_cap" in n for n in old["notes"]) and new["notes"] == []


def test_csv_query_is_a_form_of_its_own_and_the_table_adds_cuda() -> None:
    csv_full = capture("h200x1", " ".join(nvidia_smi.QUERY_ARGS)) or ""
    facts = nvidia_smi.facts_from_results(
        {"query": BROKEN_Q, "query_gpu": (0, csv_full, ""), "table": (0, capture("h200x1", "") or "", "")}
    )
    reference = nvidia_smi.facts_from_results(
        {"query": (0, capture("h200x1", "-q") or "", ""), "query_gpu": (0, csv_full, "")}
    )
    assert facts["source"] == "query_gpu"
    assert (facts["driver_version"], facts["cuda_version"]) == ("580.159.04", "13.0")
    keys = (
        "uuid",
        "name",
        "pci_bus_id",
        "memory_total_mib",
        "persistence_mode",
        "mig_mode",
        "compute_capability",
    )
    assert [tuple(g[k] for k in keys) for g in facts["gpus"]] == [
        tuple(g[k] for k in keys) for g in reference["gpus"]
    ]


# --- MIG ------------------------------------------------------------------------------------------


def test_mig_profiles_from_the_list_and_compute_instances_counted_once(tmp_path: Path) -> None:
    pytest.importorskip("ansible.module_utils.basic")
    facts = run_module(tmp_path, {"path": str(STANDIN)}, PROFILES_DIR / "h200x1-mig")["ansible_facts"][
        "nvidia_gpu"
    ]
    (gpu,) = facts["gpus"]
    assert [
        (d["index"], d["gpu_instance_id"], d["compute_instance_id"], d["profile"]) for d in gpu["mig_devices"]
    ] == [
        (0, 2, 0, "1c.3g.71gb"),
        (1, 2, 1, "2c.3g.71gb"),
        (2, 3, 0, "2g.35gb"),
        (3, 9, 0, "1g.18gb"),
        (4, 10, 0, "1g.18gb"),
    ]
    assert [d["uuid"] for d in gpu["mig_devices"]] == [
        f"MIG-0000000{i}-0000-0000-0000-00000000000{i}" for i in range(5)
    ]
    instances = [
        (i["gpu_instance_id"], i["profile"], i["memory_total_mib"], i["devices"])
        for i in gpu["mig_instances"]
    ]
    assert instances == [
        (2, "3g.71gb", 71424, [0, 1]),
        (3, "2g.35gb", 33280, [2]),
        (9, "1g.18gb", 16384, [3]),
        (10, "1g.18gb", 16384, [4]),
    ]
    # Counting each compute instance's memory would claim more than the card has.
    assert sum(d["memory_total_mib"] for d in gpu["mig_devices"]) > gpu["memory_total_mib"]
    assert sum(i["memory_total_mib"] for i in gpu["mig_instances"]) <= gpu["memory_total_mib"]
    assert facts["warnings"] == []  # "Nvlink queries are not supported for Devices in MIG mode" is no fault


def test_mig_from_the_table_and_list_when_q_is_broken() -> None:
    facts = nvidia_smi.facts_from_results(
        {
            "query": BROKEN_Q,
            "table": (0, read("h200-mig-2ci", "nvidia-smi.txt"), ""),
            "list": (0, read("h200-mig-2ci", "nvidia-smi-L.txt"), ""),
        }
    )
    reference = nvidia_smi.facts_from_results(
        {
            "query": (0, read("h200-mig-2ci", "nvidia-smi-q.txt"), ""),
            "list": (0, read("h200-mig-2ci", "nvidia-smi-L.txt"), ""),
        }
    )
    assert facts["source"] == "table" and facts["gpus"][0]["uuid"] == reference["gpus"][0]["uuid"]
    assert facts["gpus"][0]["mig_instances"] == reference["gpus"][0]["mig_instances"]


# --- NVLink -------------------------------------------------------------------------------------


def test_inactive_nvlink_links_are_warnings() -> None:
    nvlink = nvidia_smi.parse_nvlink_status(read("v100-nvlink-inactive", "nvlink-s.txt"))
    assert nvlink[3]["links"] == {0: 25.781, 1: 25.781, 2: 25.781, 3: None, 4: 25.781, 5: None}
    assert nvidia_smi.nvlink_warnings(nvlink) == [
        "GPU 3 (Tesla V100-SXM2-32GB): NVLink degraded, links 3, 5 inactive (4 of 6 active)"
    ]


def test_healthy_nvlink_gives_no_warning() -> None:
    for profile in ("h200x1-hgx", "h100x1-mig", "l40sx1"):
        assert (
            nvidia_smi.nvlink_warnings(nvidia_smi.parse_nvlink_status(capture(profile, "nvlink -s") or ""))
            == []
        )


def test_facts_carry_the_nvlink_warnings() -> None:
    q = (0, capture("h200x1", "-q") or "", "")
    facts = nvidia_smi.facts_from_results(
        {"query": q, "nvlink": (0, read("v100-nvlink-inactive", "nvlink-s.txt"), "")}
    )
    assert facts["warnings"] == [
        "GPU 3 (Tesla V100-SXM2-32GB): NVLink degraded, links 3, 5 inactive (4 of 6 active)"
    ]
    assert json.dumps(facts)  # JSON-clean, as the module returns it
