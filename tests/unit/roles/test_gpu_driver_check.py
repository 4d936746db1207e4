"""The NVIDIA driver/library check of the node_exporter role (files/vllm-fleet-gpu-driver-check)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "roles" / "node_exporter" / "files" / "vllm-fleet-gpu-driver-check"
MISMATCH_OUT = (ROOT / "tests" / "data" / "nvidia-smi" / "nvml-mismatch" / "nvidia-smi.out").read_text()


def _load():
    loader = importlib.machinery.SourceFileLoader("vllm_fleet_gpu_driver_check", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


check = _load()

PROC_VERSION = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)
PROC_VERSION_OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n"
LDCONFIG = (
    "\tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1\n"
    "\tlibnvidia-ml.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [(PROC_VERSION, "550.54.15"), (PROC_VERSION_OPEN, "570.124.06"), ("garbage", None)],
)
def test_parse_proc_version(text, expected):
    assert check.parse_proc_version(text) == expected


def test_library_path_and_version():
    assert check.library_path_from_ldconfig(LDCONFIG) == "/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    assert check.library_path_from_ldconfig("") is None
    assert (
        check.library_version_from_path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15") == "550.54.15"
    )
    assert check.library_version_from_path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") is None


@pytest.mark.parametrize(
    ("kernel", "library", "rc", "out", "mismatch", "library_label", "smi"),
    [
        ("550.54.15", "550.54.15", 0, "GPU 0: NVIDIA H100 (UUID: GPU-x)", False, "550.54.15", "ok"),
        ("550.54.14", "550.54.15", 0, "GPU 0: NVIDIA H100 (UUID: GPU-x)", True, "550.54.15", "ok"),
        # nvidia-smi's own verdict, with the library version it prints (real capture)
        ("535.154.05", None, 18, MISMATCH_OUT, True, "535.161", "error"),
        (None, None, None, "", False, "", "missing"),  # no NVIDIA driver at all
        ("550.54.15", None, -1, "", False, "", "timeout"),
        (
            None,
            "550.54.15",
            9,
            "NVIDIA-SMI has failed because it couldn't communicate",
            False,
            "550.54.15",
            "error",
        ),
    ],
)
def test_classify(kernel, library, rc, out, mismatch, library_label, smi):
    result = check.classify(kernel, library, rc, out)
    assert result["mismatch"] is mismatch
    assert result["nvml_library"] == library_label
    assert result["kernel_module"] == (kernel or "")
    assert result["nvidia_smi"] == smi


def test_render_is_valid_exposition_format(tmp_path):
    text = check.render(check.classify("1.0", "2.0", 18, 'odd "quoted"\n'), 1700000000.5)
    assert "vllm_fleet_gpu_driver_library_mismatch 1\n" in text
    assert 'vllm_fleet_gpu_driver_info{kernel_module="1.0",nvml_library="2.0",nvidia_smi="error"} 1' in text
    promtool = shutil.which("promtool")
    if promtool:
        result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_write_atomically_replaces_the_file(tmp_path):
    target = tmp_path / "vllm_fleet_gpu_driver.prom"
    target.write_text("old\n")
    check.write_atomically(str(target), "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    assert oct(target.stat().st_mode & 0o777) == "0o644"
