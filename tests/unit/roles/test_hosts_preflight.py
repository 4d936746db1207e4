"""Bad input to the host preparation roles stops the play with the variable to set and the fix.

Runs ansible-playbook (tests/hosts/preflight.yml) against this machine, always with --check,
over the facts of a simulated host: another OS, the GPUs of a real capture
(tests/data/nvidia-smi/), a driver that runs from outside the package manager. A failing
check must stop the play before anything would change, and name the variable and the fix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_smi
from nvidia_smi_profiles import capture
from tools.once_per_run import once_per_run

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = ROOT / "tests" / "hosts" / "preflight.yml"
PYTHON = "/usr/bin/python3"

pytestmark = [
    pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(
        subprocess.run([PYTHON, "-c", "import apt"], capture_output=True, check=False).returncode != 0,
        reason=f"{PYTHON} lacks python3-apt (package_facts needs it)",
    ),
]


def gpu_facts(profile: str, kernel_module: str | None = "same") -> dict[str, Any]:
    """ansible_facts.nvidia_gpu of a captured profile, with the loaded kernel module's version."""
    results = {"query": (0, capture(profile, "-q"), "")}
    topo = capture(profile, "topo -m")
    if topo is not None:
        results["topo"] = (0, topo, "")
    facts = nvidia_smi.facts_from_results(results)
    facts["kernel_module_version"] = facts["driver_version"] if kernel_module == "same" else kernel_module
    return facts


def run_cases(tmp_path: Path, cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Run the test play once for all cases: each case is a host (this machine, -c local).

    Returns host -> {"msgs": [messages of its results], "changed": N, "failures": N}.
    """
    hosts = {
        name: {
            "ansible_connection": "local",
            "ansible_python_interpreter": PYTHON,
            "standin_facts": case["facts"],
            "standin_roles": case["roles"],
            **case["extra"],
        }
        for name, case in cases.items()
    }
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    env = dict(
        os.environ,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_CACHE_PLUGIN="memory",  # keep the simulated facts out of the project's fact cache
        ANSIBLE_GATHERING="implicit",
    )
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), "--check", str(PLAYBOOK)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:  # the JSON report, then whatever other callbacks print
        report, _end = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{") :])
    except ValueError as exc:
        detail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        raise AssertionError(f"no JSON report (rc {proc.returncode}):\n{detail}") from exc
    found: dict[str, Any] = {name: {"msgs": [], "rc": proc.returncode} for name in cases}
    for play in report["plays"]:
        for task in play["tasks"]:
            for host, result in task["hosts"].items():
                if result.get("msg"):
                    found[host]["msgs"].append(str(result["msg"]))
    for host, stats in report["stats"].items():
        found[host]["changed"] = stats["changed"]
        found[host]["failures"] = stats["failures"]
    return found


def squash(text: str) -> str:
    """Output with the line breaks and indentation of wrapped messages removed."""
    return re.sub(r"\s+", " ", text)


CASES = [
    pytest.param(
        {
            "distribution": "Alpine",
            "distribution_version": "3.20.0",
            "distribution_major_version": "3",
            "os_family": "Alpine",
        },
        ["nvidia_driver"],
        {},
        [
            "nvidia_driver does not support Alpine 3.20.0",
            "Ubuntu 22.04, Ubuntu 24.04, Debian 12 and the RHEL 9 family",
            "set nvidia_driver_os_vars_override to the OS it follows",
            "Debian-12, Ubuntu-22, Ubuntu-24, RedHat-9",
            "nvidia_driver_manage: false",
        ],
        id="unsupported-os",
    ),
    pytest.param(
        {"nvidia_gpu": gpu_facts("h200x1")},
        ["nvidia_driver"],
        {"nvidia_driver_branch": "525"},
        [
            'nvidia_driver_branch "525" cannot drive the GPUs',
            "NVIDIA H200 (Hopper) needs driver branch 535 or newer",
            'Fix: set nvidia_driver_branch to a branch every GPU of the host supports ("535" or newer)',
        ],
        id="branch-too-old-for-h200",
    ),
    pytest.param(
        {"nvidia_gpu": gpu_facts("h100x8")},
        ["nvidia_driver"],
        {"nvidia_driver_branch": "470"},
        [
            "NVIDIA H100 80GB HBM3 (Hopper) needs driver branch 525 or newer",
            '("525" or newer)',
        ],
        id="branch-too-old-for-h100",
    ),
    pytest.param(
        {"nvidia_gpu": gpu_facts("v100x8")},
        ["nvidia_driver"],
        {"nvidia_driver_branch": "590"},
        [
            "Tesla V100-SXM2-16GB (Volta) is not supported after driver branch 580",
            "an older branch: 580 is the last for Maxwell, Pascal and Volta",
        ],
        id="branch-too-new-for-v100",
    ),
    pytest.param(
        {"nvidia_gpu": gpu_facts("h100x8")},
        ["nvidia_driver"],
        {"nvidia_driver_branch": "580"},
        [
            "driver 565.57.01 (branch 565) runs but was not installed from the packages",
            'Fix: keep it by setting nvidia_driver_branch: "565"',
            "nvidia-uninstall",
        ],
        id="other-driver-outside-the-package-manager",
    ),
    pytest.param(
        {"nvidia_gpu": gpu_facts("h200x1")},
        ["nvidia_container_toolkit"],
        {"vllm_image_cuda_version": "13.1", "nvidia_container_toolkit_manage": False},
        [
            "The vLLM image needs CUDA 13.1, but {host} runs driver 580.159.04, which supports CUDA 13.0",
            'Fix: set nvidia_driver_branch: "590" (or newer)',
            "vllm_image_cuda_version",
        ],
        id="image-needs-newer-cuda",
    ),
    pytest.param(
        {"nvidia_gpu": gpu_facts("h200x1")},
        ["nvidia_container_toolkit"],
        {"vllm_image_cuda_version": "13.0", "nvidia_driver_manage": True, "nvidia_driver_branch": "570"},
        [
            "The vLLM image needs CUDA 13.0, but {host} runs driver branch 570, which supports CUDA 12.8",
            'Fix: set nvidia_driver_branch: "580" (or newer)',
        ],
        id="image-needs-newer-cuda-than-the-planned-branch",
    ),
]


EXTERNAL = "driver-of-the-branch-from-elsewhere"
FRESH = "fresh-host-in-check-mode"
NO_DRIVER = {
    "present": False,
    "state": "no_driver",
    "count": 0,
    "gpus": [],
    "driver_version": None,
    "cuda_version": None,
    "kernel_module_version": None,
    "nvml_mismatch": False,
    "error": "nvidia-smi not found: the NVIDIA driver is not installed on this host",
    "topology": {},
}
KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ0test\n-----END PGP PUBLIC KEY BLOCK-----\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # one play over every case, run once for all pytest-xdist workers
    return once_per_run(tmp_path_factory, "hosts-preflight", lambda: _run_all_cases(tmp_path_factory))


def _run_all_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cases = {
        param.id: {"facts": param.values[0], "roles": param.values[1], "extra": param.values[2]}
        for param in CASES
    }
    # The H200 host's case: driver 580 mounted from the image, no driver packages: nothing to do.
    cases[EXTERNAL] = {"facts": {"nvidia_gpu": gpu_facts("h200x1")}, "roles": ["nvidia_driver"], "extra": {}}
    # A host with no driver yet, in check mode: every step says what it would do, none fails.
    tmp = tmp_path_factory.mktemp("preflight")
    key = tmp / "archive-key.asc"
    key.write_text(KEY)
    cases[FRESH] = {
        "facts": {"nvidia_gpu": NO_DRIVER},
        "roles": ["nvidia_driver", "nvidia_container_toolkit"],
        "extra": {
            "nvidia_driver_repo_url": "file:///nonexistent/cuda/",
            "nvidia_driver_repo_key_file": str(key),
            "nvidia_container_toolkit_repo_url": "file:///nonexistent/libnvidia-container/",
            "nvidia_container_toolkit_repo_key_file": str(key),
            "vllm_image_cuda_version": "12.8",
            # this machine's kernel may not be the distribution's (no headers package to plan for)
            "nvidia_driver_kernel_headers": False,
        },
    }
    return run_cases(tmp, cases)


@pytest.mark.parametrize(("facts", "roles", "extra", "messages"), CASES)
def test_bad_input_stops_with_the_fix(
    request: pytest.FixtureRequest,
    results: dict[str, Any],
    facts: Any,
    roles: Any,
    extra: Any,
    messages: list[str],
) -> None:
    host = request.node.callspec.id
    found = results[host]
    text = squash(" | ".join(found["msgs"]))
    for message in messages:
        assert message.replace("{host}", host) in text, f"missing: {message}\n{text[-4000:]}"
    assert found["failures"] == 1, found
    assert found["changed"] == 0, "a failing check must stop before any change"


def test_driver_of_the_wanted_branch_from_elsewhere_is_left_alone(results: dict[str, Any]) -> None:
    found = results[EXTERNAL]
    text = squash(" | ".join(found["msgs"]))
    assert f"{EXTERNAL}: external - driver 580.159.04 (branch 580) runs but was not installed" in text
    assert "installed outside the package manager and left as it is" in text
    assert found["failures"] == 0, text[-4000:]
    assert found["changed"] == 0, text[-4000:]


def test_fresh_host_in_check_mode_reports_the_install(results: dict[str, Any]) -> None:
    """No driver yet: check mode plans the install, the CUDA check uses the planned branch, nothing fails."""
    found = results[FRESH]
    text = squash(" | ".join(found["msgs"]))
    assert f"{FRESH}: install - driver branch 580 is not installed" in text
    assert "CUDA of the vLLM image vs the driver not checked" not in text  # 580 plans CUDA 13.0 >= 12.8
    assert found["failures"] == 0, text[-4000:]
    assert found["changed"] > 0, "check mode must report the changes a first run makes"
