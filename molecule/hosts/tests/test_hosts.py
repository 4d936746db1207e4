"""What playbooks/hosts.yml leaves on a GPU host, read back from the host itself."""

from __future__ import annotations

import json
import re

import pytest

DRIVER_VERSION = "580.159.04-1"  # newest 580 in the stand-in repository (590.48.01-1 is newer)
TOOLKIT_VERSION = "1.17.8-1"  # 1.18.0-1 is newer in the stand-in repository
DRIVER_PACKAGES = [
    "nvidia-driver-cuda",
    "nvidia-kernel-open-dkms",
    "nvidia-smi",
    "libcuda1",
    "libnvidia-ml1",
    "nvidia-persistenced",
]
TOOLKIT_PACKAGES = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]
GPUS = {"node1": 1, "node2": 8}


def hostname(host) -> str:
    return host.run("hostname").stdout.strip()


def policy(host, package: str) -> dict[str, str]:
    out = host.check_output(f"apt-cache policy {package}")
    fields = {}
    for line in out.splitlines():
        key, _, value = line.strip().partition(": ")
        if key in ("Installed", "Candidate"):
            fields[key] = value.strip()
    fields["table"] = out
    return fields


@pytest.mark.parametrize("package", DRIVER_PACKAGES)
def test_driver_package_installed_at_the_pinned_version(host, package):
    pkg = host.package(package)
    assert pkg.is_installed
    assert pkg.version == DRIVER_VERSION
    info = policy(host, package)
    # the repository has a newer branch (590) and an older 580: the pin keeps this one
    assert info["Candidate"] == DRIVER_VERSION, info["table"]
    if package == "nvidia-driver-cuda":
        assert "590.48.01-1" in info["table"], info["table"]
        assert "1001" in info["table"], info["table"]


@pytest.mark.parametrize("package", TOOLKIT_PACKAGES)
def test_toolkit_package_installed_at_the_pinned_version(host, package):
    pkg = host.package(package)
    assert pkg.is_installed
    assert pkg.version == TOOLKIT_VERSION
    info = policy(host, package)
    assert info["Candidate"] == TOOLKIT_VERSION, info["table"]
    assert "1.18.0-1" in info["table"], info["table"]


def test_packages_are_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    missing = set(DRIVER_PACKAGES + TOOLKIT_PACKAGES) - held
    assert not missing, f"not held: {sorted(missing)}; held: {sorted(held)}"


def test_upgrade_would_touch_no_nvidia_package(host):
    out = host.check_output("apt-get -s -o Debug::NoLocking=1 dist-upgrade")
    moved = [line for line in out.splitlines() if line.startswith("Inst ") and "nvidia" in line]
    assert not moved, moved


def test_pin_files(host):
    driver = host.file("/etc/apt/preferences.d/nvidia-driver.pref")
    assert driver.contains(f"Pin: version {DRIVER_VERSION}")
    assert driver.contains("Pin-Priority: 1001")
    assert driver.contains("Ansible managed")
    toolkit = host.file("/etc/apt/preferences.d/nvidia-container-toolkit.pref")
    assert toolkit.contains(f"Pin: version {TOOLKIT_VERSION}")


def test_repositories_point_at_the_mirror_with_its_key(host):
    cuda = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert cuda.contains("URIs: file:///srv/vf-hosts-standin/cuda/")
    assert cuda.contains("Signed-By:")
    assert cuda.contains("BEGIN PGP PUBLIC KEY BLOCK")
    ctk = host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources")
    assert ctk.contains("URIs: file:///srv/vf-hosts-standin/libnvidia-container/")
    # signed, not trusted blindly
    assert not cuda.contains("Trusted") and not ctk.contains("Trusted")


def test_nouveau_blacklisted(host):
    conf = host.file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert conf.contains("^blacklist nouveau$")
    assert conf.contains("^options nouveau modeset=0$")
    showconfig = host.check_output("modprobe --showconfig")
    assert "blacklist nouveau" in showconfig


def test_persistenced_enabled_and_running(host):
    svc = host.service("nvidia-persistenced")
    assert svc.is_enabled
    assert svc.is_running


def test_fabricmanager_only_on_the_nvswitch_host(host):
    pkg = host.package("nvidia-fabricmanager-580")
    if hostname(host) == "node2":
        assert pkg.is_installed
        assert pkg.version == DRIVER_VERSION
        assert host.service("nvidia-fabricmanager").is_enabled
        assert host.service("nvidia-fabricmanager").is_running
        assert "nvidia-fabricmanager-580" in host.check_output("apt-mark showhold").split()
    else:
        assert not pkg.is_installed


def test_nvidia_smi_reports_the_installed_driver(host):
    out = host.check_output("nvidia-smi -q")
    assert re.search(r"^Driver Version\s+: 580\.159\.04$", out, re.M), out[:600]
    assert re.search(rf"^Attached GPUs\s+: {GPUS[hostname(host)]}$", out, re.M), out[:600]


def test_docker_runtime_configured(host):
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert config["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert "default-runtime" not in config
    # what NVIDIA's own tool would write for the runtime
    dry = json.loads(host.check_output("nvidia-ctk runtime configure --runtime=docker --dry-run"))
    assert dry["runtimes"] == config["runtimes"]


def test_docker_daemon_options_and_runtime_coexist(host):
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    if hostname(host) == "node2":  # docker_engine manages this engine
        assert config["log-driver"] == "json-file"
        assert config["log-opts"] == {"max-size": "100m", "max-file": "5"}
        assert config["live-restore"] is True
        assert host.package("docker.io").is_installed
    else:  # provided engine: the role adds only the runtime
        assert set(config) == {"runtimes"}


def test_cdi_spec_lists_every_gpu(host):
    spec = host.file("/etc/cdi/nvidia.yaml")
    assert spec.exists
    assert spec.contains("kind: nvidia.com/gpu")
    assert spec.contains("libcuda.so.580.159.04")
    devices = host.check_output("nvidia-ctk cdi list").split()
    gpus = GPUS[hostname(host)]
    assert "nvidia.com/gpu=all" in devices
    assert len([d for d in devices if d.startswith("nvidia.com/gpu=GPU-")]) == gpus
    assert len(devices) == 2 * gpus + 1


def test_provided_engine_answers_through_its_socket(host):
    if hostname(host) != "node1":
        pytest.skip("node2 runs its own engine, which cannot start in a test container")
    assert host.exists("docker")
    assert host.package("python3-requests").is_installed
    server = host.run("docker version --format '{{.Server.Version}}'")
    assert server.rc == 0, server.stderr
    assert server.stdout.strip()
    # no daemon of its own next to the provided one
    assert host.run("systemctl is-active docker").stdout.strip() != "active"
