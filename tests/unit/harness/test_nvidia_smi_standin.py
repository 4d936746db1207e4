"""The lab's nvidia-smi stand-in: replays captures byte for byte, refuses everything else loudly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from nvidia_smi_profiles import INSTALLER, PROFILES_DIR, STANDIN, load_profile, profile_names

QUERY = " ".join(nvidia_smi.QUERY_ARGS)
LEGACY = " ".join(nvidia_smi.QUERY_ARGS_LEGACY)


def run(profile_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NVIDIA_SMI_STANDIN_DIR": str(profile_dir)}
    return subprocess.run([sys.executable, str(STANDIN), *args], capture_output=True, env=env, check=False)


@pytest.mark.parametrize(("constant", "query"), [("FACTS_QUERY", QUERY), ("FACTS_QUERY_LEGACY", LEGACY)])
def test_standin_knows_the_modules_query_forms(constant: str, query: str) -> None:
    source = STANDIN.read_text()
    match = re.search(constant + r' = \(\n((?:\s+".*"\n)+)\)', source)
    assert match, f"{constant} not found in the stand-in"
    assert "".join(re.findall(r'"(.*)"', match.group(1))) == query


def test_legacy_query_not_captured_is_refused_as_not_captured() -> None:
    result = run(PROFILES_DIR / "h200x1", *nvidia_smi.QUERY_ARGS_LEGACY)
    assert result.returncode == 2 and b"has no capture for" in result.stderr


@pytest.mark.parametrize("profile", profile_names())
def test_profile_is_consistent(profile: str) -> None:
    data = load_profile(profile)
    assert data["name"] == profile
    assert (PROFILES_DIR / profile / "SOURCE.md").is_file()
    for invocation, filename in data["outputs"].items():
        assert (PROFILES_DIR / profile / filename).is_file(), f"{invocation!r} -> missing {filename}"
        assert invocation in {
            "",
            "-L",
            "-q",
            "-q -x",
            "topo -m",
            "nvlink -s",
            "--version",
            QUERY,
            LEGACY,
        } or (invocation.startswith("--query-gpu=")), (
            f"{profile}: {invocation!r} is not a form the stand-in canonicalises to"
        )
    if data["failure"]:
        assert data["outputs"] == {}
        assert (PROFILES_DIR / profile / data["failure"]["output"]).is_file()
    else:
        # Some form the facts module reads GPUs from (-q, its CSV query, the table, -L).
        assert {"-q", "-q -x", QUERY, LEGACY, "", "-L"} & set(data["outputs"])
    assert set(data.get("exit_codes") or {}) <= set(data["outputs"])


@pytest.mark.parametrize("profile", [p for p in profile_names() if not load_profile(p)["failure"]])
def test_replays_every_capture_byte_for_byte(profile: str) -> None:
    for invocation, filename in load_profile(profile)["outputs"].items():
        result = run(PROFILES_DIR / profile, *invocation.split())
        assert result.returncode == (load_profile(profile).get("exit_codes") or {}).get(invocation, 0), (
            result.stderr
        )
        assert result.stdout == (PROFILES_DIR / profile / filename).read_bytes()


@pytest.mark.parametrize(
    "args",
    [
        ["-a"],
        ["--query"],
        ["-x", "-q"],
        ["--query", "--xml-format"],
        ["topo", "--matrix"],
        ["--format=csv,noheader,nounits", nvidia_smi.QUERY_ARGS[0]],
        ["--query-gpu", ",".join(nvidia_smi.QUERY_FIELDS), "--format", "csv,noheader,nounits"],
    ],
)
def test_equivalent_spellings(args: list[str]) -> None:
    result = run(PROFILES_DIR / "h200x1", *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout in {
        (PROFILES_DIR / "h200x1" / f).read_bytes()
        for f in ("smi_q.txt", "smi_q.xml", "topo.txt", "query.csv")
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--gpu-reset"],
        ["-pm", "1"],
        ["-q", "-d", "MEMORY"],
        ["--query-gpu=name", "--format=csv"],
        ["--query-gpu=" + ",".join(nvidia_smi.QUERY_FIELDS)],
        ["-i", "0", "-q"],
        ["topo", "-p2p", "n"],
        ["mig", "-lgi"],
    ],
)
def test_refuses_unknown_arguments_loudly(args: list[str]) -> None:
    result = run(PROFILES_DIR / "h200x1", *args)
    assert result.returncode == 2
    assert result.stdout == b""
    assert f"unsupported arguments: {' '.join(args)}" in result.stderr.decode()


def test_refuses_unknown_arguments_in_failure_modes_too() -> None:
    result = run(PROFILES_DIR / "nvml-mismatch", "--gpu-reset")
    assert result.returncode == 2 and b"unsupported arguments: --gpu-reset" in result.stderr


def test_known_but_not_captured_names_the_invocation() -> None:
    result = run(PROFILES_DIR / "rtx4090x8", "topo", "-m")
    assert result.returncode == 2 and result.stdout == b""
    assert "profile 'rtx4090x8' has no capture for: nvidia-smi topo -m" in result.stderr.decode()


@pytest.mark.parametrize(
    ("profile", "code", "first_line"),
    [
        ("nvml-mismatch", 18, "Failed to initialize NVML: Driver/library version mismatch"),
        ("no-devices", 6, "No devices were found"),
        (
            "driver-not-loaded",
            9,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        ),
    ],
)
@pytest.mark.parametrize("args", [[], ["-q"], ["-L"], QUERY.split(), ["topo", "-m"]])
def test_failure_modes(profile: str, code: int, first_line: str, args: list[str]) -> None:
    result = run(PROFILES_DIR / profile, *args)
    assert result.returncode == code
    assert result.stdout.decode().startswith(first_line)


def test_missing_profile_fails_loudly(tmp_path: Path) -> None:
    result = run(tmp_path / "nowhere", "-q")
    assert result.returncode == 2 and b"cannot read the GPU profile" in result.stderr


def test_installer_lays_out_a_lab_host(tmp_path: Path) -> None:
    (tmp_path / "usr/local/share/nvidia-smi-standin").mkdir(parents=True)
    (tmp_path / "usr/local/share/nvidia-smi-standin/stale.txt").write_text("from an earlier profile")
    out = subprocess.run(
        [sys.executable, str(INSTALLER), "h100x8", str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert "h100x8" in out.stdout
    binary = tmp_path / "usr/local/bin/nvidia-smi"
    share = tmp_path / "usr/local/share/nvidia-smi-standin"
    assert os.access(binary, os.X_OK) and oct(binary.stat().st_mode & 0o777) == "0o755"
    assert sorted(p.name for p in share.iterdir()) == sorted(
        p.name for p in (PROFILES_DIR / "h100x8").iterdir()
    )
    result = subprocess.run(
        [str(binary), "-q"],
        capture_output=True,
        env={**os.environ, "NVIDIA_SMI_STANDIN_DIR": str(share)},
        check=False,
    )
    assert result.returncode == 0 and b"Attached GPUs                             : 8" in result.stdout
    assert json.loads((share / "profile.json").read_text())["name"] == "h100x8"


def test_installer_rejects_unknown_profile(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(INSTALLER), "h900x3", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert (
        result.returncode == 2
        and "unknown GPU profile 'h900x3'" in result.stderr
        and "h200x1" in result.stderr
    )
    assert not (tmp_path / "usr").exists()
