#!/usr/bin/env python3
"""Build signed local APT repositories of stand-in NVIDIA packages (tests only).

The host preparation roles install the NVIDIA driver and Container Toolkit from
NVIDIA's repositories, which tests cannot reach and which need real GPUs. This
builds two flat APT repositories with packages that carry the real names and
versions (Debian 12 names of NVIDIA's CUDA repository) and lay down what the
real ones would, minus the kernel module:

  OUT/cuda/                  nvidia-driver-cuda, nvidia-kernel-open-dkms, nvidia-kernel-dkms,
                             nvidia-smi, libcuda1, libnvidia-ml1, nvidia-persistenced,
                             nvidia-fabricmanager-<branch>; one set per driver version
  OUT/libnvidia-container/   nvidia-container-toolkit, nvidia-container-toolkit-base,
                             libnvidia-container-tools, libnvidia-container1; one set per version
  OUT/archive-key.asc        the throwaway public key both repositories are signed with

nvidia-smi is the lab stand-in (tests/lab/nvidia-smi) with the captures of the GPU
profiles under tests/data/nvidia-smi/, their driver and CUDA versions rewritten to
the package's, so the simulated host reports the driver it installed. The profile a
host answers for is the hardware: /etc/nvidia-smi-standin/profile names it.
nvidia-ctk is tests/standin-packages/nvidia-ctk (runtime configure, cdi generate/list).
Services (nvidia-persistenced, nvidia-fabricmanager) are real systemd units running
a sleep. Never used by a production play.

Usage: build.py OUT [--profile NAME ...] [--driver VERSION ...] [--toolkit VERSION ...]
Needs dpkg-deb and gpg.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from email.utils import formatdate
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "collections"))  # this clone as the collection vllm_fleet.vllm_fleet

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host  # noqa: E402

PROFILES_DIR = ROOT / "tests" / "data" / "nvidia-smi"
NVIDIA_SMI = ROOT / "tests" / "lab" / "nvidia-smi"
NVIDIA_CTK = HERE / "nvidia-ctk"
LIBDIR = "usr/lib/x86_64-linux-gnu"
MAINTAINER = "vllm-fleet tests <tests@vllm-fleet.invalid>"

DEFAULT_DRIVERS = ["580.95.05-1", "580.159.04-1", "590.48.01-1"]
DEFAULT_TOOLKITS = ["1.17.8-1", "1.18.0-1"]
DEFAULT_PROFILES = ["h200x1", "h100x8", "nvml-mismatch"]

SMI_WRAPPER = """#!/bin/sh
# nvidia-smi stand-in (tests only): replays the captures of the GPU profile this
# simulated host has; /etc/nvidia-smi-standin/profile names it.
profile=$(cat /etc/nvidia-smi-standin/profile 2>/dev/null)
if [ -z "$profile" ] || [ ! -d "/usr/share/nvidia-smi-standin/$profile" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." \\
       "(stand-in: no GPU profile in /etc/nvidia-smi-standin/profile)"
  exit 9
fi
NVIDIA_SMI_STANDIN_DIR="/usr/share/nvidia-smi-standin/$profile" \\
  exec python3 /usr/lib/nvidia-smi-standin/nvidia-smi "$@"
"""

SLEEPER = """#!/bin/sh
# {name} stand-in (tests only): a real GPU host runs NVIDIA's daemon here.
exec sleep infinity
"""

REFUSER = """#!/bin/sh
# {name} stand-in (tests only): needs a real GPU host.
echo "{name}: stand-in of a test package; it needs a real NVIDIA GPU host" >&2
exit 1
"""

UNIT = """[Unit]
Description={description} (stand-in, tests only)
{extra}
[Service]
Type=simple
ExecStart={exec_start}

[Install]
WantedBy=multi-user.target
"""


def run(*argv: str, **kwargs: object) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, **kwargs)  # type: ignore[call-overload]


class Package:
    """A Debian binary package staged in a temporary folder."""

    def __init__(self, name: str, version: str, description: str, **fields: str) -> None:
        self.name = name
        self.version = version
        self.description = description
        self.fields = fields
        self.files: dict[str, tuple[bytes, int]] = {}
        self.links: dict[str, str] = {}
        self.scripts: dict[str, str] = {}
        self.conffiles: list[str] = []

    def add(self, path: str, content: str | bytes, mode: int = 0o644, conffile: bool = False) -> None:
        data = content.encode() if isinstance(content, str) else content
        self.files[path.lstrip("/")] = (data, mode)
        if conffile:
            self.conffiles.append("/" + path.lstrip("/"))

    def link(self, path: str, target: str) -> None:
        self.links[path.lstrip("/")] = target

    def build(self, out_dir: Path) -> Path:
        with tempfile.TemporaryDirectory(prefix="standin-deb-") as tmp:
            stage = Path(tmp) / "root"
            for rel, (data, mode) in self.files.items():
                path = stage / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                path.chmod(mode)
            for rel, target in self.links.items():
                path = stage / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.symlink_to(target)
            control_dir = stage / "DEBIAN"
            control_dir.mkdir(parents=True, exist_ok=True)
            lines = [
                f"Package: {self.name}",
                f"Version: {self.version}",
                "Architecture: all",
                f"Maintainer: {MAINTAINER}",
                "Section: non-free/libs",
                "Priority: optional",
            ]
            lines += [f"{key.replace('_', '-')}: {value}" for key, value in self.fields.items()]
            lines.append(f"Description: {self.description}")
            lines.append(" Stand-in package for tests: same name and version as NVIDIA's, no GPU code.")
            (control_dir / "control").write_text("\n".join(lines) + "\n")
            if self.conffiles:
                (control_dir / "conffiles").write_text("\n".join(self.conffiles) + "\n")
            for script, body in self.scripts.items():
                path = control_dir / script
                path.write_text("#!/bin/sh\nset -e\n" + body)
                path.chmod(0o755)
            deb = out_dir / f"{self.name}_{self.version}_all.deb"
            run(
                "dpkg-deb",
                "--root-owner-group",
                "-Zgzip",
                "--build",
                str(stage),
                str(deb),
                stdout=subprocess.DEVNULL,
            )
            return deb


# --- driver packages -----------------------------------------------------------


def rewrite_capture(text: str, captured_driver: str, driver: str, cuda: str) -> str:
    """A capture as the stand-in driver's nvidia-smi would print it."""
    text = text.replace(captured_driver, driver)
    text = re.sub(r"(CUDA Version\s*:\s*)\d+\.\d+", lambda m: m.group(1) + cuda, text)
    text = re.sub(r"(<cuda_version>)[^<]+(</cuda_version>)", lambda m: m.group(1) + cuda + m.group(2), text)
    return text


def captured_driver_version(profile_dir: Path) -> str:
    for path in sorted(profile_dir.iterdir()):
        match = re.search(r"Driver Version\s*:\s*(\d+\.\d+(?:\.\d+)?)", path.read_text(errors="replace"))
        if match:
            return match.group(1)
    raise SystemExit(f"build.py: no 'Driver Version' in the captures of {profile_dir}")


def driver_packages(version: str, profiles: list[str]) -> list[Package]:
    upstream = nvidia_host.upstream_version(version)
    branch = nvidia_host.branch_of(version)
    if not upstream or not branch:
        raise SystemExit(f"build.py: '{version}' is not a driver package version such as 580.159.04-1")
    cuda = nvidia_host.branch_max_cuda(branch) or "12.0"
    exact = f"(= {version})"
    pkgs = []

    meta = Package(
        "nvidia-driver-cuda",
        version,
        "NVIDIA driver CUDA integration components",
        Depends=(
            f"nvidia-smi {exact}, libcuda1 {exact}, libnvidia-ml1 {exact}, nvidia-persistenced {exact}, "
            f"nvidia-kernel-open-dkms {exact} | nvidia-kernel-dkms {exact}"
        ),
    )
    meta.add("usr/share/doc/nvidia-driver-cuda/README.standin", f"NVIDIA driver {upstream} stand-in.\n")
    pkgs.append(meta)

    for name, other, flavour in (
        ("nvidia-kernel-open-dkms", "nvidia-kernel-dkms", "open"),
        ("nvidia-kernel-dkms", "nvidia-kernel-open-dkms", "proprietary"),
    ):
        kmod = Package(
            name,
            version,
            f"NVIDIA binary kernel module DKMS source ({flavour})",
            Provides=f"nvidia-kernel-dkms-any {exact}",
            Conflicts=other,
        )
        kmod.add(
            f"usr/src/nvidia-{upstream}/STANDIN",
            f"{flavour} kernel module {upstream}: not built (stand-in)\n",
        )
        pkgs.append(kmod)

    smi = Package("nvidia-smi", version, "NVIDIA System Management Interface", Depends="python3")
    smi.add("usr/bin/nvidia-smi", SMI_WRAPPER, 0o755)
    smi.add("usr/lib/nvidia-smi-standin/nvidia-smi", NVIDIA_SMI.read_bytes(), 0o755)
    for profile in profiles:
        src = PROFILES_DIR / profile
        if not (src / "profile.json").exists():
            raise SystemExit(f"build.py: no GPU profile {src}")
        if json.loads((src / "profile.json").read_text()).get("failure"):
            # a failing driver (version mismatch, no device): replayed as captured
            for path in sorted(src.iterdir()):
                smi.add(f"usr/share/nvidia-smi-standin/{profile}/{path.name}", path.read_bytes())
            continue
        captured = captured_driver_version(src)
        for path in sorted(src.iterdir()):
            data = path.read_text(errors="replace")
            if path.name != "SOURCE.md":
                data = rewrite_capture(data, captured, upstream, cuda)
            smi.add(f"usr/share/nvidia-smi-standin/{profile}/{path.name}", data)
        smi.add(
            f"usr/share/nvidia-smi-standin/{profile}/STANDIN.md",
            f"Captures of tests/data/nvidia-smi/{profile}/ with driver {captured} rewritten to {upstream}"
            f" and the CUDA version to {cuda}, the highest of branch {branch}.\n",
        )
    pkgs.append(smi)

    for name, lib in (("libcuda1", "libcuda.so"), ("libnvidia-ml1", "libnvidia-ml.so")):
        pkg = Package(name, version, f"NVIDIA {lib} library")
        pkg.add(f"{LIBDIR}/{lib}.{upstream}", f"{lib} {upstream} (stand-in: no code)\n")
        pkg.link(f"{LIBDIR}/{lib}.1", f"{lib}.{upstream}")
        pkgs.append(pkg)

    persistenced = Package(
        "nvidia-persistenced", version, "daemon to maintain persistent software state in the NVIDIA driver"
    )
    persistenced.add("usr/bin/nvidia-persistenced", SLEEPER.format(name="nvidia-persistenced"), 0o755)
    persistenced.add(
        "lib/systemd/system/nvidia-persistenced.service",
        UNIT.format(
            description="NVIDIA Persistence Daemon", extra="", exec_start="/usr/bin/nvidia-persistenced"
        ),
    )
    persistenced.scripts["postinst"] = "systemctl daemon-reload >/dev/null 2>&1 || true\n"
    pkgs.append(persistenced)

    fabric = Package(
        f"nvidia-fabricmanager-{branch}",
        version,
        "Fabric Manager for NVSwitch based systems",
        Depends=f"nvidia-driver-cuda {exact} | nvidia-kernel-dkms-any {exact}",
    )
    fabric.add("usr/bin/nv-fabricmanager", SLEEPER.format(name="nv-fabricmanager"), 0o755)
    fabric.add(
        "usr/share/nvidia/nvswitch/fabricmanager.cfg",
        "# Fabric Manager configuration (stand-in)\nLOG_LEVEL=4\nFABRIC_MODE=0\n",
        conffile=True,
    )
    fabric.add(
        "lib/systemd/system/nvidia-fabricmanager.service",
        UNIT.format(
            description="NVIDIA fabric manager service",
            extra="After=network-online.target\n",
            exec_start="/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg",
        ),
    )
    fabric.scripts["postinst"] = "systemctl daemon-reload >/dev/null 2>&1 || true\n"
    pkgs.append(fabric)
    return pkgs


# --- toolkit packages ------------------------------------------------------------


def toolkit_packages(version: str) -> list[Package]:
    upstream = version.split("-", 1)[0]
    exact = f"(= {version})"
    base = Package(
        "nvidia-container-toolkit-base", version, "NVIDIA Container Toolkit Base", Depends="python3"
    )
    base.add("usr/bin/nvidia-ctk", NVIDIA_CTK.read_text().replace("@VERSION@", upstream), 0o755)
    base.add("usr/bin/nvidia-container-runtime", REFUSER.format(name="nvidia-container-runtime"), 0o755)
    base.add("usr/bin/nvidia-cdi-hook", REFUSER.format(name="nvidia-cdi-hook"), 0o755)
    base.add(
        "etc/nvidia-container-runtime/config.toml",
        '#accept-nvidia-visible-devices-as-volume-mounts = false\n\n'
        '[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n',
        conffile=True,
    )
    toolkit = Package(
        "nvidia-container-toolkit",
        version,
        "NVIDIA Container toolkit",
        Depends=f"nvidia-container-toolkit-base {exact}, libnvidia-container-tools (>= {version}), "
        "libnvidia-container-tools (<< 2.0.0)",
    )
    toolkit.add(
        "usr/bin/nvidia-container-runtime-hook", REFUSER.format(name="nvidia-container-runtime-hook"), 0o755
    )
    tools = Package(
        "libnvidia-container-tools",
        version,
        "NVIDIA container runtime library (command-line tools)",
        Depends=f"libnvidia-container1 (>= {version})",
    )
    tools.add("usr/bin/nvidia-container-cli", REFUSER.format(name="nvidia-container-cli"), 0o755)
    lib = Package("libnvidia-container1", version, "NVIDIA container runtime library")
    lib.add(
        f"{LIBDIR}/libnvidia-container.so.{upstream}", f"libnvidia-container {upstream} (stand-in: no code)\n"
    )
    lib.link(f"{LIBDIR}/libnvidia-container.so.1", f"libnvidia-container.so.{upstream}")
    return [base, toolkit, tools, lib]


# --- repository ------------------------------------------------------------------


def control_of(deb: Path) -> str:
    return subprocess.run(
        ["dpkg-deb", "--field", str(deb)], check=True, capture_output=True, text=True
    ).stdout


def write_index(repo: Path, gnupg_home: Path, origin: str) -> None:
    """Packages, Packages.gz, Release, InRelease and Release.gpg of a flat repository."""
    entries = []
    for deb in sorted(repo.glob("*.deb")):
        data = deb.read_bytes()
        entries.append(
            control_of(deb).rstrip("\n")
            + f"\nFilename: ./{deb.name}\nSize: {len(data)}\n"
            + f"MD5sum: {hashlib.md5(data).hexdigest()}\nSHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    packages = "\n".join(entries).encode()
    (repo / "Packages").write_bytes(packages)
    with gzip.GzipFile(repo / "Packages.gz", "wb", mtime=0) as handle:
        handle.write(packages)
    lines = [
        f"Origin: {origin}",
        f"Label: {origin}",
        "Architectures: all amd64 arm64",
        f"Date: {formatdate(usegmt=True)}",
        "SHA256:",
    ]
    for name in ("Packages", "Packages.gz"):
        data = (repo / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    (repo / "Release").write_text("\n".join(lines) + "\n")
    gpg = ["gpg", "--batch", "--yes", "--homedir", str(gnupg_home)]
    run(*gpg, "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release"))
    run(*gpg, "--armor", "--detach-sign", "-o", str(repo / "Release.gpg"), str(repo / "Release"))


def make_key(gnupg_home: Path, out: Path) -> None:
    gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    gpg = ["gpg", "--batch", "--homedir", str(gnupg_home), "--passphrase", "", "--pinentry-mode", "loopback"]
    run(
        *gpg,
        "--quick-gen-key",
        "vllm-fleet stand-in archive (tests only)",
        "ed25519",
        "sign",
        "1d",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    key = subprocess.run(
        ["gpg", "--batch", "--homedir", str(gnupg_home), "--armor", "--export"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    out.write_text(key)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--profile", action="append", dest="profiles")
    parser.add_argument("--driver", action="append", dest="drivers")
    parser.add_argument("--toolkit", action="append", dest="toolkits")
    args = parser.parse_args(argv)
    for tool in ("dpkg-deb", "gpg"):
        if not shutil.which(tool):
            print(f"build.py: {tool} is needed (apt-get install dpkg gnupg)", file=sys.stderr)
            return 2
    out: Path = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    cuda_repo = out / "cuda"
    ctk_repo = out / "libnvidia-container"
    cuda_repo.mkdir(parents=True)
    ctk_repo.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="standin-gnupg-") as tmp:
        home = Path(tmp) / "gnupg"
        make_key(home, out / "archive-key.asc")
        for version in args.drivers or DEFAULT_DRIVERS:
            for pkg in driver_packages(version, args.profiles or DEFAULT_PROFILES):
                pkg.build(cuda_repo)
        for version in args.toolkits or DEFAULT_TOOLKITS:
            for pkg in toolkit_packages(version):
                pkg.build(ctk_repo)
        write_index(cuda_repo, home, "NVIDIA CUDA stand-in")
        write_index(ctk_repo, home, "NVIDIA libnvidia-container stand-in")
        # gpg-agent of the throwaway home must not outlive the build
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
    count = len(list(out.glob("*/*.deb")))
    print(f"{count} stand-in packages in {out}")
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main(sys.argv[1:]))
