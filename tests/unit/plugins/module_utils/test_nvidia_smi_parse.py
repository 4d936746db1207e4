"""nvidia-smi report parsers, driven by the real captures of every GPU profile."""

from __future__ import annotations

import json
import re

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from nvidia_smi_profiles import PROFILES_DIR, capture, load_profile, profile_names

# Expected values read off the raw captures (grep), not off the parser.
# profile: (count, name, memory MiB, compute capability, driver, CUDA, first bus id, last bus id,
#           first uuid, mig_mode, persistence_mode)
EXPECTED = {
    "h200x1": (
        1,
        "NVIDIA H200",
        143771,
        "9.0",
        "580.159.04",
        "13.0",
        "00000000:00:06.0",
        "00000000:00:06.0",
        "GPU-a86eaf22-296c-ab99-4615-1d31e8f17c53",
        "disabled",
        True,
    ),
    "h200x1-hgx": (
        1,
        "NVIDIA H200",
        143771,
        "9.0",
        "590.48.01",
        "13.1",
        "00000000:83:00.0",
        "00000000:83:00.0",
        "GPU-00000000-0000-0000-0000-000000000000",
        "disabled",
        True,
    ),
    "h200x1-mig": (
        1,
        "NVIDIA H200",
        143771,
        "9.0",
        "590.48.01",
        "13.1",
        "00000000:83:00.0",
        "00000000:83:00.0",
        "GPU-00000000-0000-0000-0000-000000000000",
        "enabled",
        True,
    ),
    "h100x1-mig": (
        1,
        "NVIDIA H100 80GB HBM3",
        81559,
        "9.0",
        "590.48.01",
        "13.1",
        "00000000:00:09.0",
        "00000000:00:09.0",
        "GPU-00000000-0000-0000-0000-000000000000",
        "enabled",
        True,
    ),
    "h100x8": (
        8,
        "NVIDIA H100 80GB HBM3",
        81559,
        "9.0",
        "565.57.01",
        "12.7",
        "00000000:18:00.0",
        "00000000:DB:00.0",
        "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1",
        "disabled",
        True,
    ),
    "h100x8-r535": (
        8,
        "NVIDIA H100 80GB HBM3",
        81559,
        "9.0",
        "535.183.01",
        "12.2",
        "00000000:53:00.0",
        "00000000:CA:00.0",
        "GPU-566e6f65-c38e-b12f-4824-6944218668b9",
        "disabled",
        True,
    ),
    "h100nvlx2": (
        2,
        "NVIDIA H100 NVL",
        95830,
        "9.0",
        "550.54.14",
        "12.4",
        "00000000:AD:00.0",
        "00000000:AE:00.0",
        "GPU-806f8ea2-6428-1096-a076-bb687fb45fb0",
        "disabled",
        True,
    ),
    "a100x8": (
        8,
        "A100-SXM4-40GB",
        40536,
        "8.0",
        "460.32.03",
        "11.2",
        "00000001:00:00.0",
        "0000000E:00:00.0",
        "GPU-b01e9f90-c60c-4ad1-2052-154833662357",
        "disabled",
        False,
    ),
    "a100x4": (
        4,
        "NVIDIA A100-SXM4-80GB",
        81920,
        "8.0",
        "555.42.02",
        "12.5",
        "00000000:68:00.0",
        "00000000:D4:00.0",
        "GPU-31515c3d-1414-7c2c-004a-f86a898946ac",
        "disabled",
        True,
    ),
    "a100x1-mig-xml": (
        1,
        "NVIDIA A100-SXM4-80GB",
        81920,
        "8.0",
        "535.54.03",
        "12.2",
        "00000000:01:00.0",
        "00000000:01:00.0",
        "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        "enabled",
        False,
    ),
    "a40x10": (
        10,
        "NVIDIA A40",
        46068,
        "8.6",
        "550.127.05",
        "12.4",
        "00000000:4F:00.0",
        "00000000:D6:00.0",
        "GPU-4e65de01-972e-93cf-b077-181a5378972a",
        None,
        True,
    ),
    "a10x1": (
        1,
        "NVIDIA A10",
        23028,
        "8.6",
        "535.129.03",
        "12.2",
        "00000000:07:00.0",
        "00000000:07:00.0",
        "GPU-73d12ef7-f589-f867-4259-c7090ab44736",
        None,
        True,
    ),
    "l40sx1": (
        1,
        "NVIDIA L40S",
        46068,
        "8.9",
        "595.80",
        "13.2",
        "00000000:01:00.0",
        "00000000:01:00.0",
        "GPU-00000000-0000-0000-0000-000000000000",
        None,
        False,
    ),
    "l4x1": (
        1,
        "NVIDIA L4",
        23034,
        "8.9",
        "550.90.07",
        "12.4",
        "00000000:01:00.0",
        "00000000:01:00.0",
        "GPU-453f8851-d1a3-e72d-4d85-3ef04418205b",
        None,
        True,
    ),
    "rtx4090x8": (
        8,
        "NVIDIA GeForce RTX 4090",
        24564,
        "8.9",
        "550.127.05",
        "12.4",
        "00000000:01:00.0",
        "00000000:E1:00.0",
        "GPU-8ee5f1e0-e705-aac5-6d6e-b97ad59601ef",
        None,
        True,
    ),
    "rtx3090x2": (
        2,
        "NVIDIA GeForce RTX 3090",
        24576,
        "8.6",
        "560.35.03",
        "12.6",
        "00000000:41:00.0",
        "00000000:81:00.0",
        "GPU-4aba3cfa-7b42-cca6-97f4-5cdd281b0746",
        None,
        True,
    ),
    "rtx4060tix2": (
        2,
        "NVIDIA GeForce RTX 4060 Ti",
        16380,
        "8.9",
        "550.54.14",
        "12.4",
        "00000000:03:00.0",
        "00000000:09:00.0",
        "GPU-5fd2f5bb-12a1-ad58-a590-2f48aa312d92",
        None,
        False,
    ),
    "rtx6000adax8": (
        8,
        "NVIDIA RTX 6000 Ada Generation",
        49140,
        "8.9",
        "550.127.05",
        "12.4",
        "00000000:01:00.0",
        "00000000:E1:00.0",
        "GPU-6130ccb8-7d66-5560-15ea-9a2a08dc87e7",
        None,
        True,
    ),
    "rtxa6000x9": (
        9,
        "NVIDIA RTX A6000",
        46068,
        "8.6",
        "550.127.05",
        "12.4",
        "00000000:4F:00.0",
        "00000000:D6:00.0",
        "GPU-880b8a57-8586-fe40-bec5-fb703f80ffe6",
        None,
        True,
    ),
    "v100x8": (
        8,
        "Tesla V100-SXM2-16GB",
        16384,
        "7.0",
        "550.127.05",
        "12.4",
        "00000000:00:04.0",
        "00000000:00:0B.0",
        "GPU-f3bbf1a0-ec50-caa0-d5ab-180afe8207e3",
        None,
        True,
    ),
    "t4x1-xml": (
        1,
        "Tesla T4",
        15360,
        "7.5",
        "515.105.01",
        "11.7",
        "00000000:00:1E.0",
        "00000000:00:1E.0",
        "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
        None,
        False,
    ),
}
FAILURE_PROFILES = {"nvml-mismatch", "no-devices", "driver-not-loaded"}
# Hosts where only the plain table answers (test_nvidia_smi_fallbacks.py).
TABLE_ONLY_PROFILES = {"gh200x1-table", "p4000x1-inforom"}


def _report(profile: str) -> dict:
    text = capture(profile, "-q")
    if text is not None:
        return nvidia_smi.parse_query(text)
    return nvidia_smi.parse_query_xml(capture(profile, "-q -x") or "")


def test_every_profile_has_expectations() -> None:
    profiles = set(profile_names()) - {p for p in profile_names() if p.endswith("-device")}
    assert profiles == set(EXPECTED) | FAILURE_PROFILES | TABLE_ONLY_PROFILES


@pytest.mark.parametrize("profile", sorted(EXPECTED))
def test_report(profile: str) -> None:
    count, name, mem, cc, driver, cuda, first_bus, last_bus, uuid, mig, persistence = EXPECTED[profile]
    facts = nvidia_smi.build_facts(_report(profile))
    gpus = facts["gpus"]
    assert facts["present"] is True and facts["state"] == "ok"
    assert facts["count"] == count == len(gpus)
    assert [g["index"] for g in gpus] == list(range(count))
    assert {g["name"] for g in gpus} == {name}
    assert facts["models"] == {name: count} and facts["homogeneous"] is True
    assert {g["memory_total_mib"] for g in gpus} == {mem}
    assert {g["compute_capability"] for g in gpus} == {cc}
    assert (facts["driver_version"], facts["cuda_version"]) == (driver, cuda)
    assert (gpus[0]["pci_bus_id"], gpus[-1]["pci_bus_id"]) == (first_bus, last_bus)
    assert gpus[0]["uuid"] == uuid
    assert len({g["uuid"] for g in gpus}) == count or uuid.startswith("GPU-00000000")
    assert {g["mig_mode"] for g in gpus} == {mig}
    assert {g["persistence_mode"] for g in gpus} == {persistence}


def _table_rows(text: str) -> list[tuple[int, str, int]]:
    """(index, bus id, memory total MiB) per GPU of the plain nvidia-smi table."""
    text = re.split(r"\| (?:MIG devices|Processes):", text)[0]
    rows = re.findall(r"^\|\s+(\d+)\s+.*?\|\s+([0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.\d)\s", text, re.M)
    mems = re.findall(r"\|\s+\d+MiB\s+/\s+(\d+)MiB\s+\|", text)
    return [(int(i), bus, int(m)) for (i, bus), m in zip(rows, mems, strict=True)]


@pytest.mark.parametrize("profile", [p for p in sorted(EXPECTED) if capture(p, "") is not None])
def test_report_agrees_with_plain_table(profile: str) -> None:
    """The plain table is an independent rendering of the same host: same GPUs, order and memory."""
    facts = nvidia_smi.build_facts(_report(profile))
    expected = [(g["index"], g["pci_bus_id"], g["memory_total_mib"]) for g in facts["gpus"]]
    assert _table_rows(capture(profile, "") or "") == expected


def test_xml_and_text_reports_of_the_same_host_agree() -> None:
    assert nvidia_smi.parse_query_xml(capture("h200x1", "-q -x") or "") == nvidia_smi.parse_query(
        capture("h200x1", "-q") or ""
    )


@pytest.mark.parametrize(
    ("profile", "devices"),
    [
        # (gpu_instance_id, compute_instance_id, memory MiB, SMs) read off the captures
        ("h100x1-mig", [(2, 0, 40448, 60), (3, 0, 20096, 32), (9, 0, 9984, 16), (10, 0, 9984, 16)]),
        (
            "h200x1-mig",
            [(2, 0, 71424, 16), (2, 1, 71424, 32), (3, 0, 33280, 32), (9, 0, 16384, 16), (10, 0, 16384, 16)],
        ),
        ("a100x1-mig-xml", [(3, 0, 19968, 14), (4, 0, 19968, 14), (5, 0, 19968, 14), (6, 0, 19968, 14)]),
    ],
)
def test_mig_devices(profile: str, devices: list[tuple[int, int, int, int]]) -> None:
    gpu = _report(profile)["gpus"][0]
    assert gpu["mig_mode"] == "enabled"
    got = [
        (d["gpu_instance_id"], d["compute_instance_id"], d["memory_total_mib"], d["multiprocessor_count"])
        for d in gpu["mig_devices"]
    ]
    assert got == devices


def test_trimmed_report_is_noted() -> None:
    facts = nvidia_smi.build_facts(_report("a100x1-mig-xml"))
    assert facts["count"] == 1
    assert facts["notes"] == ["nvidia-smi says 4 GPUs are attached but describes 1"]


def test_query_gpu_csv_supplies_compute_capability() -> None:
    rows = nvidia_smi.parse_query_gpu_csv(capture("h200x1", " ".join(nvidia_smi.QUERY_ARGS)) or "")
    assert rows[0]["compute_cap"] == "9.0" and rows[0]["memory.total"] == "143771"
    facts = nvidia_smi.build_facts(_report("h200x1"), rows)
    assert facts["gpus"][0]["compute_capability_source"] == "nvidia-smi"
    assert nvidia_smi.build_facts(_report("h200x1"))["gpus"][0]["compute_capability_source"] == "product"


def test_query_gpu_csv_reported_value_wins_over_table() -> None:
    rows = nvidia_smi.parse_query_gpu_csv(capture("h200x1", " ".join(nvidia_smi.QUERY_ARGS)) or "")
    rows[0]["compute_cap"] = "9.9"
    assert nvidia_smi.build_facts(_report("h200x1"), rows)["gpus"][0]["compute_capability"] == "9.9"


def test_query_gpu_csv_rejects_other_field_lists() -> None:
    with pytest.raises(ValueError, match="expected 13 fields"):
        nvidia_smi.parse_query_gpu_csv("0, NVIDIA H200\n")


def test_list_gpus_with_mig() -> None:
    gpus = nvidia_smi.parse_list_gpus(capture("h100x1-mig", "-L") or "")
    assert [(g["index"], g["name"]) for g in gpus] == [(0, "NVIDIA H100 80GB HBM3")]
    assert [m["profile"] for m in gpus[0]["mig"]] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]


@pytest.mark.parametrize(
    ("name", "cc", "arch"),
    [
        # names as nvidia-smi prints them (captures, plus current products)
        ("NVIDIA H200", "9.0", "Hopper"),
        ("NVIDIA H200 NVL", "9.0", "Hopper"),
        ("NVIDIA H100 80GB HBM3", "9.0", "Hopper"),
        ("NVIDIA H100 PCIe", "9.0", "Hopper"),
        ("NVIDIA H20", "9.0", "Hopper"),
        ("NVIDIA GH200 480GB", "9.0", "Hopper"),
        ("NVIDIA B200", "10.0", "Blackwell"),
        ("NVIDIA GB200", "10.0", "Blackwell"),
        ("NVIDIA B300 SXM6 AC", "10.3", "Blackwell"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", "Blackwell"),
        ("NVIDIA GeForce RTX 5090", "12.0", "Blackwell"),
        ("A100-SXM4-40GB", "8.0", "Ampere"),
        ("NVIDIA A100 80GB PCIe", "8.0", "Ampere"),
        ("NVIDIA A100-PCIE-40GB", "8.0", "Ampere"),
        ("NVIDIA A30", "8.0", "Ampere"),
        ("NVIDIA A10", "8.6", "Ampere"),
        ("NVIDIA A10G", "8.6", "Ampere"),
        ("NVIDIA A40", "8.6", "Ampere"),
        ("NVIDIA RTX A6000", "8.6", "Ampere"),
        ("NVIDIA GeForce RTX 3090", "8.6", "Ampere"),
        ("NVIDIA L40S", "8.9", "Ada Lovelace"),
        ("NVIDIA L4", "8.9", "Ada Lovelace"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9", "Ada Lovelace"),
        ("NVIDIA GeForce RTX 4090", "8.9", "Ada Lovelace"),
        ("NVIDIA GeForce RTX 4060 Ti", "8.9", "Ada Lovelace"),
        ("Tesla T4", "7.5", "Turing"),
        ("Quadro RTX 8000", "7.5", "Turing"),
        ("Tesla V100-SXM2-16GB", "7.0", "Volta"),
        ("Tesla P100-PCIE-16GB", "6.0", "Pascal"),
        ("Quadro P4000", "6.1", "Pascal"),
        ("Tesla K80", "3.7", "Kepler"),
        ("GeForce RTX 2080 Ti", "7.5", "Turing"),
        ("NVIDIA GeForce RTX 2060", "7.5", "Turing"),
        ("NVIDIA GeForce RTX 3060 Ti", "8.6", "Ampere"),
    ],
)
def test_product_table(name: str, cc: str, arch: str) -> None:
    info = nvidia_smi.product_info(name)
    assert info is not None and (info["compute_capability"], info["architecture"]) == (cc, arch)


def test_unknown_product_has_no_compute_capability() -> None:
    assert nvidia_smi.product_info("NVIDIA Imaginary X1") is None
    report = nvidia_smi.parse_query(capture("l4x1", "-q") or "")
    report["gpus"][0]["name"] = "NVIDIA Imaginary X1"
    gpu = nvidia_smi.build_facts(report)["gpus"][0]
    assert gpu["compute_capability"] is None and gpu["compute_capability_source"] is None


def test_mixed_host_is_reported_per_gpu() -> None:
    """Two real GPU sections (an L4 and an A10 report) joined into one host report."""
    l4 = capture("l4x1", "-q") or ""
    a10 = capture("a10x1", "-q") or ""
    a10_gpu = a10[a10.index("\nGPU 0000") :]
    facts = nvidia_smi.build_facts(nvidia_smi.parse_query(l4.rstrip("\n") + a10_gpu))
    assert facts["count"] == 2 and facts["homogeneous"] is False
    assert facts["models"] == {"NVIDIA L4": 1, "NVIDIA A10": 1}
    assert [(g["index"], g["name"], g["compute_capability"]) for g in facts["gpus"]] == [
        (0, "NVIDIA L4", "8.9"),
        (1, "NVIDIA A10", "8.6"),
    ]


def test_failure_profiles_have_no_report() -> None:
    for name in FAILURE_PROFILES:
        assert load_profile(name)["failure"]["mode"] == name


def test_reserved_memory_matches_what_cuda_reports() -> None:
    """On the H200 host, CUDA's total (nvml.json, torch.cuda.mem_get_info) is total minus Reserved."""
    gpu = _report("h200x1")["gpus"][0]
    assert (gpu["memory_total_mib"], gpu["memory_reserved_mib"]) == (143771, 616)
    nvml = json.loads((PROFILES_DIR / "h200x1" / "nvml.json").read_text())
    assert nvml["mem_total"] == gpu["memory_total_mib"] * 2**20
    cuda_total_mib = nvml["torch_total"] / 2**20
    assert abs(gpu["memory_total_mib"] - gpu["memory_reserved_mib"] - cuda_total_mib) < 1


@pytest.mark.parametrize(("profile", "reserved"), [("h100x8", 454), ("rtx4090x8", 354), ("a100x8", None)])
def test_reserved_memory(profile: str, reserved: int | None) -> None:
    """Older drivers (460 on a100x8) print no Reserved line."""
    assert {g["memory_reserved_mib"] for g in _report(profile)["gpus"]} == {reserved}
