"""GPU links and NUMA affinity: topo -m, nvlink -s, NVSwitch detection and fallbacks."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from nvidia_smi_profiles import ROOT, capture

TOPO_ONLY = ROOT / "tests" / "data" / "nvidia-smi-topo"


def _facts(profile: str, topo: bool = True, nvlink: bool = True) -> dict:
    report = nvidia_smi.parse_query(capture(profile, "-q") or "")
    topo_text = capture(profile, "topo -m") if topo else None
    nvlink_text = capture(profile, "nvlink -s") if nvlink else None
    return nvidia_smi.build_facts(
        report,
        None,
        nvidia_smi.parse_topo_matrix(topo_text) if topo_text is not None else None,
        nvidia_smi.parse_nvlink_status(nvlink_text) if nvlink_text is not None else None,
    )


def _all_pairs(n: int) -> list[list[int]]:
    return [list(p) for p in combinations(range(n), 2)]


@pytest.mark.parametrize(
    ("profile", "path", "nvlinks", "numa"),
    [
        ("h100x8", "NV18", 18, {"0": [0, 1, 2, 3], "1": [4, 5, 6, 7]}),
        ("a100x8", "NV12", 12, {"0": [0, 1, 2, 3], "1": [4, 5, 6, 7]}),
    ],
)
def test_hgx_boards_link_every_pair_through_nvswitch(
    profile: str, path: str, nvlinks: int, numa: dict
) -> None:
    topology = _facts(profile)["topology"]
    assert topology["source"] == "topo"
    assert topology["interconnect"] == "nvswitch" and topology["nvswitch"] is True
    assert [link["gpus"] for link in topology["links"]] == _all_pairs(8)
    assert {(link["kind"], link["path"], link["nvlinks"]) for link in topology["links"]} == {
        ("nvswitch", path, nvlinks)
    }
    assert topology["nvlink_islands"] == [list(range(8))]
    assert topology["numa_nodes"] == numa
    assert topology["numa"] == {str(i): (0 if i < 4 else 1) for i in range(8)}


def test_per_gpu_numa_and_cpu_affinity() -> None:
    gpus = _facts("h100x8")["gpus"]
    assert [(g["numa_node"], g["cpu_affinity"]) for g in gpus] == [(0, "0-51")] * 4 + [(1, "52-103")] * 4


def test_nvswitch_fabric_state_without_topo() -> None:
    """Hopper GPUs report their NVSwitch fabric membership in -q; no topo capture needed."""
    topology = _facts("h100x8-r535")["topology"]
    assert topology["source"] == "fabric" and topology["interconnect"] == "nvswitch"
    assert [link["gpus"] for link in topology["links"]] == _all_pairs(8)
    assert {link["kind"] for link in topology["links"]} == {"nvswitch"}
    assert topology["numa"] == {}


def test_boards_without_nvlink_talk_over_pcie() -> None:
    topology = _facts("rtx4090x8")["topology"]
    assert topology["source"] == "product" and topology["interconnect"] == "pcie"
    assert len(topology["links"]) == 28 and {link["kind"] for link in topology["links"]} == {"pcie"}
    assert topology["nvlink_islands"] == [[i] for i in range(8)]


@pytest.mark.parametrize("profile", ["rtx3090x2", "h100nvlx2", "a100x4", "v100x8"])
def test_optional_nvlink_bridges_stay_unknown_without_topo(profile: str) -> None:
    """These boards may or may not carry NVLink bridges: without topo -m nothing is guessed."""
    topology = _facts(profile)["topology"]
    assert topology["source"] is None and topology["interconnect"] == "unknown" and topology["links"] == []


@pytest.mark.parametrize(
    ("profile", "nvswitch", "cpus", "links"),
    [
        ("h200x1", False, "0-15", {}),
        ("h200x1-hgx", True, "0-23", {0: 18}),  # one GPU of an NVSwitch board, its 18 links up
        ("h100x1-mig", True, "0-19", {0: 0}),  # MIG mode: nvlink queries unsupported
        ("l40sx1", False, "0-7", {0: 0}),  # no NVLink on the board
    ],
)
def test_single_gpu_hosts(profile: str, nvswitch: bool, cpus: str, links: dict) -> None:
    facts = _facts(profile)
    topology = facts["topology"]
    assert topology["interconnect"] == "none" and topology["links"] == []
    assert topology["nvswitch"] is nvswitch
    assert topology["numa"] == {"0": 0} and topology["numa_nodes"] == {"0": [0]}
    assert (facts["gpus"][0]["numa_node"], facts["gpus"][0]["cpu_affinity"]) == (0, cpus)
    status = nvidia_smi.parse_nvlink_status(capture(profile, "nvlink -s") or "")
    assert {i: s["active_links"] for i, s in status.items()} == links


def test_nvlink_status_messages() -> None:
    mig = nvidia_smi.parse_nvlink_status(capture("h100x1-mig", "nvlink -s") or "")
    assert mig[0]["message"] == "Nvlink queries are not supported for Devices in MIG mode"
    l40s = nvidia_smi.parse_nvlink_status(capture("l40sx1", "nvlink -s") or "")
    assert l40s[0]["message"] == "Device does not have or support Nvlink"
    hgx = nvidia_smi.parse_nvlink_status(capture("h200x1-hgx", "nvlink -s") or "")
    assert set(hgx[0]["links"].values()) == {26.562}


def test_raw_topo_keeps_ansi_header_and_empty_cells_apart() -> None:
    topo = nvidia_smi.parse_topo_matrix(capture("h200x1", "topo -m") or "")
    assert topo["devices"] == ["GPU0"]
    assert topo["affinity"]["GPU0"] == {"cpu_affinity": "0-15", "numa_affinity": "0", "gpu_numa_id": None}


@pytest.mark.parametrize(
    ("fixture", "interconnect", "kind", "path"),
    [
        ("2gpu-nvlink-nv2.txt", "nvlink", "nvlink", "NV2"),  # bridge: 2 links, no switch
        ("2gpu-pcie-phb.txt", "pcie", "pcie", "PHB"),
    ],
)
def test_two_gpu_matrices(fixture: str, interconnect: str, kind: str, path: str) -> None:
    report = nvidia_smi.parse_query(capture("rtx3090x2", "-q") or "")
    topo = nvidia_smi.parse_topo_matrix((TOPO_ONLY / fixture).read_text())
    topology = nvidia_smi.build_facts(report, None, topo)["topology"]
    assert topology["interconnect"] == interconnect and topology["nvswitch"] is False
    assert topology["links"] == [
        {"gpus": [0, 1], "kind": kind, "nvlinks": 2 if kind == "nvlink" else 0, "path": path}
    ]
    assert topology["numa"] == {}  # NUMA Affinity N/A: single socket


def test_hyperthread_cpu_affinity_lists() -> None:
    topo = nvidia_smi.parse_topo_matrix((TOPO_ONLY / "8x-h100-nv18-ht.txt").read_text())
    assert topo["affinity"]["GPU0"]["cpu_affinity"] == "0-51,104-155"
    assert topo["affinity"]["GPU7"] == {"cpu_affinity": "52-103,156-207", "numa_affinity": "1"}


def _matrix(rows: list[str], nics: str = "") -> str:
    n = len(rows)
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    body = "".join(f"GPU{i}\t" + rows[i] + f"\t0-7\t{i // 2}\t\tN/A\n" for i in range(n))
    return head + body + nics + "\nLegend:\n\n  X    = Self\n"


def test_direct_nvlink_mesh_is_not_mistaken_for_nvswitch() -> None:
    """4 A100 SXM4 boards meshed directly: NV4 to each peer uses all 12 links (no switch)."""
    report = nvidia_smi.parse_query(capture("a100x4", "-q") or "")
    rows = ["X\tNV4\tNV4\tNV4", "NV4\tX\tNV4\tNV4", "NV4\tNV4\tX\tNV4", "NV4\tNV4\tNV4\tX"]
    topology = nvidia_smi.build_facts(report, None, nvidia_smi.parse_topo_matrix(_matrix(rows)))["topology"]
    assert topology["interconnect"] == "nvlink" and topology["nvswitch"] is False
    assert topology["numa_nodes"] == {"0": [0, 1], "1": [2, 3]}


def test_partial_nvlink_gives_mixed_islands() -> None:
    """Pairs bridged 0-1 and 2-3, PCIe between the pairs."""
    report = nvidia_smi.parse_query(capture("a100x4", "-q") or "")
    rows = ["X\tNV4\tSYS\tSYS", "NV4\tX\tSYS\tSYS", "SYS\tSYS\tX\tNV4", "SYS\tSYS\tNV4\tX"]
    topology = nvidia_smi.build_facts(report, None, nvidia_smi.parse_topo_matrix(_matrix(rows)))["topology"]
    assert topology["interconnect"] == "mixed"
    assert topology["nvlink_islands"] == [[0, 1], [2, 3]]
    assert [(link["gpus"], link["kind"], link["path"]) for link in topology["links"]] == [
        ([0, 1], "nvlink", "NV4"),
        ([0, 2], "pcie", "SYS"),
        ([0, 3], "pcie", "SYS"),
        ([1, 2], "pcie", "SYS"),
        ([1, 3], "pcie", "SYS"),
        ([2, 3], "nvlink", "NV4"),
    ]


def test_nic_rows_and_legend() -> None:
    text = (
        "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV18\tPXB\t0-7\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tSYS\t8-15\t1\t\tN/A\n"
        "NIC0\tPXB\tSYS\t X \t\t\t\t\n"
        "\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"
    )
    topo = nvidia_smi.parse_topo_matrix(text)
    assert topo["devices"] == ["GPU0", "GPU1", "NIC0"]
    assert topo["nics"] == {"NIC0": "mlx5_0"}
    assert topo["matrix"]["NIC0"] == {"GPU0": "PXB", "GPU1": "SYS", "NIC0": "X"}
    assert topo["affinity"]["GPU1"]["numa_affinity"] == "1"


def test_topo_without_header_is_rejected() -> None:
    with pytest.raises(ValueError, match="GPU0"):
        nvidia_smi.parse_topo_matrix("Legend:\n")


def test_every_topo_capture_parses() -> None:
    files = [Path(p) for p in sorted(TOPO_ONLY.glob("*.txt"))]
    assert len(files) == 3
    for path in files:
        topo = nvidia_smi.parse_topo_matrix(path.read_text())
        assert all(topo["matrix"][g][g] == "X" for g in topo["devices"])
