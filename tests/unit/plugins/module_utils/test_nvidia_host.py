"""Host preparation decisions (module_utils/nvidia_host.py), table-driven.

GPU cases use the facts the nvidia_gpu_facts parser builds from the real captures
under tests/data/nvidia-smi/, so a change in what the facts report shows up here.
"""

from __future__ import annotations

from typing import Any

import jinja2
import pytest
import yaml
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host, nvidia_smi
from nvidia_smi_profiles import ROOT as ROOT_DIR
from nvidia_smi_profiles import capture


def profile_facts(name: str) -> dict[str, Any]:
    """ansible_facts.nvidia_gpu as the module reports it for a captured profile."""
    results = {"query": (0, capture(name, "-q"), "")}
    for key, invocation in (("topo", "topo -m"), ("nvlink", "nvlink -s")):
        text = capture(name, invocation)
        if text is not None:
            results[key] = (0, text, "")
    return nvidia_smi.facts_from_results(results)


# --- versions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "branch"),
    [
        ("580.159.04", "580"),
        ("580.95.05-1", "580"),
        ("580.95.05-0ubuntu1", "580"),
        ("3:580.95.05-1.el9", "580"),
        ("1.17.8-1", None),
        ("", None),
        (None, None),
        ("5:28.5.2-1~debian.12~bookworm", None),
    ],
)
def test_branch_of(version: str | None, branch: str | None) -> None:
    assert nvidia_host.branch_of(version) == branch


@pytest.mark.parametrize(
    ("version", "upstream"),
    [("3:580.95.05-1.el9", "580.95.05"), ("580.159.04", "580.159.04"), ("1.17.8-1", None), (None, None)],
)
def test_upstream_version(version: str | None, upstream: str | None) -> None:
    assert nvidia_host.upstream_version(version) == upstream


@pytest.mark.parametrize("bad", ["58", "580.95", "latest", "", None, "r580"])
def test_check_branch_rejects(bad: Any) -> None:
    with pytest.raises(nvidia_host.NvidiaHostError, match="not a driver branch"):
        nvidia_host.check_branch(bad)


# --- CUDA <-> branch ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuda", "branch"),
    [
        ("12.8", 570),
        ("12.8.1", 570),
        ("13.0", 580),
        ("12.2", 535),
        ("11.8", 520),
        ("13.2", 595),
        ("14.0", None),
    ],
)
def test_cuda_min_branch(cuda: str, branch: int | None) -> None:
    assert nvidia_host.cuda_min_branch(cuda) == branch


@pytest.mark.parametrize(
    ("branch", "cuda"),
    [("580", "13.0"), ("575", "12.9"), ("570", "12.8"), ("535", "12.2"), ("590", "13.1"), ("440", None)],
)
def test_branch_max_cuda(branch: str, cuda: str | None) -> None:
    assert nvidia_host.branch_max_cuda(branch) == cuda


@pytest.mark.parametrize(
    ("driver", "image", "ok", "min_branch"),
    [
        ("13.0", "12.8", True, 570),
        ("12.8", "12.8.1", True, 570),
        ("12.4", "12.8", False, 570),
        ("12.7", "13.0", False, 580),
        ("13.0", "13.1", False, 590),
        ("12.10", "12.9", True, 575),  # numeric, not string, comparison
    ],
)
def test_cuda_check(driver: str, image: str, ok: bool, min_branch: int) -> None:
    result = nvidia_host.cuda_check(driver, image)
    assert result["ok"] is ok
    assert result["min_branch"] == min_branch


@pytest.mark.parametrize("bad", ["twelve", "", None])
def test_cuda_check_rejects_bad_versions(bad: Any) -> None:
    with pytest.raises(nvidia_host.NvidiaHostError, match="not a CUDA version"):
        nvidia_host.cuda_check("13.0", bad)


@pytest.mark.parametrize(
    ("config", "cuda"),
    [
        ({"Env": ["PATH=/usr/bin", "CUDA_VERSION=12.8.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.8"]}, "12.8"),
        ({"Env": ["PATH=/usr/bin"], "Labels": {"com.nvidia.cuda.version": "12.9.0"}}, "12.9"),
        ({"Env": [], "Labels": {"cuda_version": "13.0"}}, "13.0"),
        ({"Env": ["PATH=/usr/bin"], "Labels": {}}, None),
        (None, None),
    ],
)
def test_cuda_version_from_image(config: dict[str, Any] | None, cuda: str | None) -> None:
    assert nvidia_host.cuda_version_from_image(config) == cuda


# --- GPUs and branches (real captures) -----------------------------------------------


@pytest.mark.parametrize(
    ("profile", "branch", "problem"),
    [
        ("h200x1", "580", None),
        ("h200x1", "535", None),
        ("h200x1", "525", "NVIDIA H200 (Hopper) needs driver branch 535 or newer"),
        ("h100x8", "525", None),
        ("h100x8", "470", "NVIDIA H100 80GB HBM3 (Hopper) needs driver branch 525 or newer"),
        ("l40sx1", "520", "NVIDIA L40S (Ada Lovelace) needs driver branch 525 or newer"),
        ("a100x8", "450", None),
        ("a100x8", "440", "A100-SXM4-40GB (Ampere) needs driver branch 450 or newer"),
        ("a10x1", "450", "NVIDIA A10 (Ampere) needs driver branch 455 or newer"),
        ("v100x8", "580", None),
        ("v100x8", "590", "Tesla V100-SXM2-16GB (Volta) is not supported after driver branch 580"),
    ],
)
def test_gpu_branch_problems_on_captures(profile: str, branch: str, problem: str | None) -> None:
    problems = nvidia_host.gpu_branch_problems(profile_facts(profile)["gpus"], branch)
    assert problems == ([problem] if problem else [])


def test_gpu_branch_problems_reports_each_model_once() -> None:
    gpus = profile_facts("h100x8")["gpus"]
    assert len(gpus) == 8
    assert len(nvidia_host.gpu_branch_problems(gpus, "470")) == 1


@pytest.mark.parametrize(
    ("gpu", "low", "high"),
    [
        ({"name": "NVIDIA B200", "compute_capability": "10.0"}, 570, None),
        ({"name": "NVIDIA B300", "architecture": "Blackwell"}, 580, None),
        ({"name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}, 570, None),
        ({"name": "Tesla P100-PCIE-16GB", "compute_capability": "6.0"}, 367, 580),
        ({"name": "Some future GPU"}, None, None),
    ],
)
def test_gpu_branch_range_without_captures(gpu: dict[str, Any], low: int | None, high: int | None) -> None:
    assert nvidia_host.gpu_branch_range(gpu) == (low, high)


def test_gpu_min_branch_of_mixed_host() -> None:
    gpus = profile_facts("a10x1")["gpus"] + profile_facts("h200x1")["gpus"]
    assert nvidia_host.gpu_min_branch(gpus) == 535
    assert nvidia_host.gpu_min_branch([]) is None


@pytest.mark.parametrize(
    ("requested", "profile", "branch", "installed", "flavor"),
    [
        ("auto", "h200x1", "580", None, "open"),
        ("auto", "h200x1", "550", None, "proprietary"),
        ("auto", "h200x1", "580", "proprietary", "proprietary"),  # keeps what the host has
        ("auto", "v100x8", "580", None, "proprietary"),
        ("open", "v100x8", "580", None, "open"),  # explicit wins; kernel_module_problems reports it
        ("proprietary", "h100x8", "580", None, "proprietary"),
    ],
)
def test_kernel_module_flavor(
    requested: str, profile: str, branch: str, installed: str | None, flavor: str
) -> None:
    gpus = profile_facts(profile)["gpus"]
    assert nvidia_host.kernel_module_flavor(requested, gpus, branch, installed) == flavor


def test_kernel_module_problems() -> None:
    assert nvidia_host.kernel_module_problems("open", profile_facts("v100x8")["gpus"]) == [
        "Tesla V100-SXM2-16GB (Volta) runs only the proprietary kernel modules"
    ]
    blackwell = [{"name": "NVIDIA B200", "compute_capability": "10.0"}]
    assert nvidia_host.kernel_module_problems("proprietary", blackwell) == [
        "NVIDIA B200 (Blackwell) runs only the open kernel modules"
    ]
    assert nvidia_host.kernel_module_problems("open", blackwell) == []
    with pytest.raises(nvidia_host.NvidiaHostError, match="kernel module flavour"):
        nvidia_host.kernel_module_flavor("closed", [], "580")


GH200_TABLE = nvidia_smi.parse_table(
    (
        ROOT_DIR / "tests" / "data" / "nvidia-smi" / "captures" / "gh200-aarch64-table" / "nvidia-smi.txt"
    ).read_text()
)


def test_grace_hopper_runs_only_the_open_modules() -> None:
    """The GH200 of a real aarch64 host (table capture): auto picks open, even over installed proprietary."""
    gpus = nvidia_smi.build_facts(GH200_TABLE, source="table")["gpus"]
    assert [g["name"] for g in gpus] == ["NVIDIA GH200 480GB"]
    assert nvidia_host.grace_superchip(gpus[0]) == "Grace Hopper"
    assert nvidia_host.kernel_module_flavor("auto", gpus, "580", None) == "open"
    assert nvidia_host.kernel_module_flavor("auto", gpus, "580", "proprietary") == "open"
    assert nvidia_host.kernel_module_flavor("auto", gpus, "550", None) == "open"
    assert nvidia_host.kernel_module_flavor("proprietary", gpus, "580", None) == "proprietary"
    assert nvidia_host.kernel_module_problems("proprietary", gpus) == [
        "NVIDIA GH200 480GB (Grace Hopper superchip, aarch64) runs only the open kernel modules"
    ]
    assert nvidia_host.kernel_module_problems("open", gpus) == []


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("NVIDIA GH200 480GB", "Grace Hopper"),
        ("NVIDIA GH200 144G HBM3e", "Grace Hopper"),
        ("NVIDIA GB200", "Grace Blackwell"),
        ("NVIDIA GB300", "Grace Blackwell"),
        ("NVIDIA GB10", "Grace Blackwell"),
        ("NVIDIA H200", None),
        ("NVIDIA B200", None),
    ],
)
def test_grace_superchips(name: str, kind: str | None) -> None:
    assert nvidia_host.grace_superchip({"name": name}) == kind


def test_grace_blackwell_problem_is_named_once() -> None:
    gb200 = [{"name": "NVIDIA GB200", "compute_capability": "10.0"}] * 4
    assert nvidia_host.kernel_module_problems("proprietary", gb200) == [
        "NVIDIA GB200 (Grace Blackwell superchip, aarch64) runs only the open kernel modules"
    ]


# --- NVSwitch ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "needed"),
    [
        ("h100x8", True),  # HGX H100: topo -m shows NV18 through NVSwitch
        ("h100x8-r535", True),
        ("a100x8", True),
        ("h200x1", False),
        ("h200x1-hgx", False),  # one GPU of an HGX board: the owner of the switches runs Fabric Manager
        ("h100x1-mig", False),
        ("a100x4", False),  # 4-GPU HGX A100: direct NVLink, no NVSwitch
        ("h100nvlx2", False),
        ("rtx4090x8", False),
        ("rtx6000adax8", False),
        ("v100x8", False),  # SXM2: hybrid cube mesh, no NVSwitch
    ],
)
def test_needs_fabricmanager_on_captures(profile: str, needed: bool) -> None:
    assert nvidia_host.needs_fabricmanager(profile_facts(profile)) is needed


def test_needs_fabricmanager_from_names_without_topology() -> None:
    eight_h200 = {"gpus": [{"name": "NVIDIA H200"}] * 8, "topology": {"nvswitch": False}}
    eight_nvl = {"gpus": [{"name": "NVIDIA H200 NVL"}] * 8, "topology": {}}
    assert nvidia_host.needs_fabricmanager(eight_h200) is True
    assert nvidia_host.needs_fabricmanager(eight_nvl) is False
    assert nvidia_host.needs_fabricmanager({}) is False
    assert nvidia_host.needs_fabricmanager(None) is False


# --- the driver role's plan -------------------------------------------------------------

DEBIAN = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"]
UBUNTU = ["nvidia-headless-580-open", "nvidia-utils-580"]


def pkgs(**versions: str) -> dict[str, list[dict[str, str]]]:
    return {name.replace("_", "-"): [{"version": v}] for name, v in versions.items()}


INSTALLED_580 = pkgs(nvidia_driver_cuda="580.159.04-1", nvidia_kernel_open_dkms="580.159.04-1", bash="5.2")
INSTALLED_570 = pkgs(nvidia_driver_cuda="570.172.08-1", nvidia_kernel_open_dkms="570.172.08-1")

PLAN_CASES = [
    # id, packages, wanted, branch, version, kernel module, nvidia-smi, adopt -> action, pin, reboot reasons
    ("fresh host", {}, DEBIAN, "580", "", None, None, True, "install", "580.*", 0),
    (
        "fresh host, exact version",
        {},
        DEBIAN,
        "580",
        "580.95.05-1",
        None,
        None,
        True,
        "install",
        "580.95.05-1",
        0,
    ),
    (
        "installed and loaded",
        INSTALLED_580,
        DEBIAN,
        "580",
        "",
        "580.159.04",
        "580.159.04",
        True,
        "none",
        "580.159.04-1",
        0,
    ),
    (
        "installed, exact version matches",
        INSTALLED_580,
        DEBIAN,
        "580",
        "580.159.04-1",
        "580.159.04",
        "580.159.04",
        True,
        "none",
        "580.159.04-1",
        0,
    ),
    (
        "installed, other exact version wanted",
        INSTALLED_580,
        DEBIAN,
        "580",
        "580.95.05-1",
        "580.159.04",
        "580.159.04",
        True,
        "install",
        "580.95.05-1",
        1,
    ),
    (
        "upgraded without reboot",
        INSTALLED_580,
        DEBIAN,
        "580",
        "",
        "570.172.08",
        None,
        True,
        "none",
        "580.159.04-1",
        1,
    ),
    (
        "branch change on a live host",
        INSTALLED_570,
        DEBIAN,
        "580",
        "",
        "570.172.08",
        "570.172.08",
        True,
        "install",
        "580.*",
        1,
    ),
    (
        "installed, module not loaded yet",
        INSTALLED_580,
        DEBIAN,
        "580",
        "",
        None,
        None,
        True,
        "none",
        "580.159.04-1",
        0,
    ),
    (
        "runfile/image driver of the branch",
        pkgs(bash="5.2"),
        UBUNTU,
        "580",
        "",
        "580.159.04",
        "580.159.04",
        True,
        "external",
        None,
        0,
    ),
    (
        "driver of the branch seen by nvidia-smi only",
        {},
        UBUNTU,
        "580",
        "",
        None,
        "580.159.04",
        True,
        "external",
        None,
        0,
    ),
    (
        "external driver, adopting switched off",
        {},
        UBUNTU,
        "580",
        "",
        "580.159.04",
        "580.159.04",
        False,
        "conflict",
        None,
        0,
    ),
    (
        "external driver of another branch",
        {},
        UBUNTU,
        "580",
        "",
        "550.127.05",
        "550.127.05",
        True,
        "conflict",
        None,
        0,
    ),
    (
        "half-installed",
        pkgs(nvidia_driver_cuda="580.159.04-1"),
        DEBIAN,
        "580",
        "",
        None,
        None,
        True,
        "install",
        "580.*",
        0,
    ),
]


@pytest.mark.parametrize(
    ("packages", "wanted", "branch", "version", "kmod", "smi", "adopt", "action", "pin", "reboots"),
    [case[1:] for case in PLAN_CASES],
    ids=[case[0] for case in PLAN_CASES],
)
def test_driver_plan(
    packages: dict[str, Any],
    wanted: list[str],
    branch: str,
    version: str,
    kmod: str | None,
    smi: str | None,
    adopt: bool,
    action: str,
    pin: str | None,
    reboots: int,
) -> None:
    plan = nvidia_host.driver_plan(packages, wanted, branch, version, kmod, smi, adopt)
    assert plan["action"] == action, plan["reason"]
    assert plan["pin"] == pin
    assert len(plan["reboot"]) == reboots, plan["reboot"]


def test_driver_plan_names_what_it_found() -> None:
    plan = nvidia_host.driver_plan(INSTALLED_570, DEBIAN, "580", "", "570.172.08", "570.172.08")
    assert plan["installed"] == {
        "nvidia-driver-cuda": "570.172.08-1",
        "nvidia-kernel-open-dkms": "570.172.08-1",
    }
    assert plan["running_branch"] == "570"
    assert plan["reboot"] == ["the loaded kernel module 570.172.08 will be replaced"]
    conflict = nvidia_host.driver_plan({}, UBUNTU, "580", "", "550.127.05", None)
    assert "550.127.05 (branch 550)" in conflict["reason"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"wanted": [], "branch": "580"}, "package list is empty"),
        ({"wanted": DEBIAN, "branch": "580", "version": "570.172.08-1"}, "not of driver branch 580"),
        ({"wanted": DEBIAN, "branch": "latest"}, "not a driver branch"),
    ],
)
def test_driver_plan_rejects(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(nvidia_host.NvidiaHostError, match=message):
        nvidia_host.driver_plan({}, **kwargs)


def test_family_and_other_branch_packages() -> None:
    packages = pkgs(
        nvidia_driver_cuda="580.159.04-1",
        libcuda1="580.159.04-1",
        nvidia_fabricmanager_570="570.172.08-1",
        nvidia_container_toolkit="1.17.8-1",
        bash="5.2",
    )
    pattern = r"^(nvidia-|libnvidia-|libcuda)"
    assert nvidia_host.family_packages(packages, pattern, "580") == ["libcuda1", "nvidia-driver-cuda"]
    assert nvidia_host.other_branch_packages(packages, pattern, "580") == ["nvidia-fabricmanager-570"]


DPKG_OUTPUT = """\
nvidia-container-toolkit 1.17.8-1 hold installed
nvidia-container-toolkit-base 1.17.8-1 install installed
libnvidia-container1:amd64 1.17.8-1 hold installed
libnvidia-container-tools 1.17.7-1 install config-files
"""


def test_dpkg_status() -> None:
    status = nvidia_host.dpkg_status(DPKG_OUTPUT)
    assert status == {
        "nvidia-container-toolkit": {"version": "1.17.8-1", "held": True},
        "nvidia-container-toolkit-base": {"version": "1.17.8-1", "held": False},
        "libnvidia-container1": {"version": "1.17.8-1", "held": True},
    }
    assert nvidia_host.dpkg_status("") == {}
    assert nvidia_host.dpkg_status(None) == {}


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("1.17.8-1", ["libnvidia-container-tools"]),
        (
            "1.18.0-1",
            [
                "nvidia-container-toolkit",
                "nvidia-container-toolkit-base",
                "libnvidia-container1",
                "libnvidia-container-tools",
            ],
        ),
        ("", ["libnvidia-container-tools"]),
    ],
)
def test_packages_to_install(version: str, expected: list[str]) -> None:
    status = nvidia_host.dpkg_status(DPKG_OUTPUT)
    names = [
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
        "libnvidia-container1",
        "libnvidia-container-tools",
    ]
    assert nvidia_host.packages_to_install(status, names, version) == expected


def test_packages_to_hold() -> None:
    status = nvidia_host.dpkg_status(DPKG_OUTPUT)
    names = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools"]
    assert nvidia_host.packages_to_hold(status, names) == ["nvidia-container-toolkit-base"]


def test_installed_packages() -> None:
    assert nvidia_host.installed_packages(DPKG_OUTPUT, "apt") == {
        "nvidia-container-toolkit": [{"version": "1.17.8-1"}],
        "nvidia-container-toolkit-base": [{"version": "1.17.8-1"}],
        "libnvidia-container1": [{"version": "1.17.8-1"}],
    }
    rpm = "nvidia-driver-cuda 580.95.05\nkmod-nvidia-open-dkms 580.95.05\nkernel 5.14.0\nkernel 5.14.1\n"
    found = nvidia_host.installed_packages(rpm, "dnf")
    assert found["nvidia-driver-cuda"] == [{"version": "580.95.05"}]
    assert len(found["kernel"]) == 2
    plan = nvidia_host.driver_plan(found, ["nvidia-driver-cuda", "kmod-nvidia-open-dkms"], "580", "580.95.05")
    assert plan["action"] == "none"
    with pytest.raises(nvidia_host.NvidiaHostError, match="package manager"):
        nvidia_host.installed_packages("", "zypper")


def test_driver_plan_on_the_real_h200_host() -> None:
    """The recorded state of the H200 host: driver 580 from the image, no driver package."""
    state = ROOT_DIR / "tests" / "data" / "host-state" / "h200-device"
    packages = {}
    for line in (state / "dpkg-l-nvidia.txt").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] in ("ii", "hi"):
            packages[fields[1]] = [{"version": fields[2]}]
    assert "libnccl2" in packages  # the capture holds CUDA libraries, not the driver
    kmod = nvidia_smi.parse_proc_version((state / "proc-driver-nvidia-version.txt").read_text())
    assert kmod == "580.159.04"
    ubuntu_580 = ["nvidia-headless-580-open", "nvidia-utils-580"]
    plan = nvidia_host.driver_plan(packages, ubuntu_580, "580", "", kmod, "580.159.04")
    assert plan["action"] == "external"
    assert plan["reboot"] == []
    ubuntu_570 = ["nvidia-headless-570-open", "nvidia-utils-570"]
    other = nvidia_host.driver_plan(packages, ubuntu_570, "570", "", kmod, None)
    assert other["action"] == "conflict"
    assert other["running_branch"] == "580"


# --- aarch64 (Grace) repository paths ------------------------------------------------------------


@pytest.mark.parametrize(
    ("os_vars", "folder"),
    [
        ("Ubuntu-22", "ubuntu2204"),
        ("Ubuntu-24", "ubuntu2404"),
        ("Debian-12", "debian12"),
        ("RedHat-9", "rhel9"),
    ],
)
@pytest.mark.parametrize(("arch", "repo_arch"), [("x86_64", "x86_64"), ("aarch64", "sbsa")])
def test_driver_repository_of_each_cpu_architecture(
    os_vars: str, folder: str, arch: str, repo_arch: str
) -> None:
    """Grace (aarch64) hosts take NVIDIA's server-Arm (sbsa) folder of the same repository, same key."""
    role = ROOT_DIR / "roles" / "nvidia_driver" / "vars"
    common = yaml.safe_load((role / "main.yml").read_text())
    os_specific = yaml.safe_load((role / "os" / f"{os_vars}.yml").read_text())
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    context: dict[str, Any] = {"ansible_facts": {"architecture": arch}}
    context["__nvidia_driver_repo_arch"] = env.from_string(common["__nvidia_driver_repo_arch"]).render(
        context
    )
    url = env.from_string(os_specific["__nvidia_driver_repo_default_url"]).render(context)
    context["__nvidia_driver_repo_default_url"] = url
    key = env.from_string(os_specific["__nvidia_driver_repo_default_key_url"]).render(context)
    assert url == f"https://developer.download.nvidia.com/compute/cuda/repos/{folder}/{repo_arch}/"
    assert key.startswith(url) and key.endswith(".pub")
