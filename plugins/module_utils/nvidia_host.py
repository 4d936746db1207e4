"""Host preparation decisions for NVIDIA GPU hosts: pure functions, stdlib only.

Used by the ``nvidia_driver`` and ``nvidia_container_toolkit`` roles through the
thin filter shim ``filter_plugins/nvidia_host.py``:

* which driver branches a GPU can run (minimum per architecture/product, last
  branch for legacy architectures) and which kernel module flavour it needs;
* which driver branch a CUDA version needs, and the highest CUDA version a
  branch supports (the check ``nvidia-container-cli`` makes at container start
  with ``NVIDIA_REQUIRE_CUDA``);
* whether a host has NVSwitch and so needs ``nvidia-fabricmanager``;
* what the driver role has to do on a host, from its installed packages and the
  loaded driver (``driver_plan``): nothing, install, leave an externally
  installed driver alone, or stop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any


class NvidiaHostError(ValueError):
    """Invalid input to one of the functions of this module."""


# --- versions -----------------------------------------------------------------

_BRANCH_RE = re.compile(r"^\d{3,4}$")
_VERSION_RE = re.compile(r"^(?:\d+:)?(\d{3,4})\.\d+")
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)")


def branch_of(version: str | None) -> str | None:
    """Driver branch of a driver or package version, or None.

    ``580.159.04`` -> ``580``; ``580.95.05-0ubuntu1`` -> ``580``; an epoch
    (``3:580.95.05-1.el9``) is ignored. Anything else (``1.17.8-1``) -> None.
    """
    if not version:
        return None
    match = _VERSION_RE.match(str(version).strip())
    return match.group(1) if match else None


def upstream_version(version: str | None) -> str | None:
    """The driver version inside a package version: ``3:580.95.05-1.el9`` -> ``580.95.05``."""
    if not version:
        return None
    text = str(version).strip()
    if ":" in text:
        text = text.split(":", 1)[1]
    text = text.split("-", 1)[0]
    return text if branch_of(text) else None


def check_branch(branch: Any) -> str:
    """Return the branch as a string, or raise when it is not a driver branch like ``580``."""
    text = str(branch).strip() if branch is not None else ""
    if not _BRANCH_RE.match(text):
        raise NvidiaHostError(f"'{branch}' is not a driver branch: expected a number such as \"580\"")
    return text


def _cuda_tuple(version: Any) -> tuple[int, int]:
    match = _CUDA_RE.match(str(version).strip()) if version is not None else None
    if not match:
        raise NvidiaHostError(f"'{version}' is not a CUDA version: expected MAJOR.MINOR such as \"12.8\"")
    return int(match.group(1)), int(match.group(2))


# --- CUDA version <-> driver branch -------------------------------------------

# Minimum Linux driver branch of each CUDA toolkit release (NVIDIA CUDA Toolkit
# release notes, "CUDA Toolkit and Corresponding Driver Versions"). The highest
# CUDA version a driver supports is what nvidia-smi prints as "CUDA Version".
CUDA_MIN_BRANCH: tuple[tuple[tuple[int, int], int], ...] = (
    ((11, 0), 450),
    ((11, 1), 455),
    ((11, 2), 460),
    ((11, 3), 465),
    ((11, 4), 470),
    ((11, 5), 495),
    ((11, 6), 510),
    ((11, 7), 515),
    ((11, 8), 520),
    ((12, 0), 525),
    ((12, 1), 530),
    ((12, 2), 535),
    ((12, 3), 545),
    ((12, 4), 550),
    ((12, 5), 555),
    ((12, 6), 560),
    ((12, 7), 565),
    ((12, 8), 570),
    ((12, 9), 575),
    ((13, 0), 580),
    ((13, 1), 590),
    ((13, 2), 595),
)


def cuda_min_branch(cuda_version: Any) -> int | None:
    """Oldest driver branch that runs CUDA ``cuda_version``; None when newer than the table knows."""
    wanted = _cuda_tuple(cuda_version)
    for cuda, branch in CUDA_MIN_BRANCH:
        if cuda >= wanted:
            return branch
    return None


def branch_max_cuda(branch: Any) -> str | None:
    """Highest CUDA version (``MAJOR.MINOR``) a driver branch supports; None when older than CUDA 11.0."""
    number = int(check_branch(branch))
    best: tuple[int, int] | None = None
    for cuda, min_branch in CUDA_MIN_BRANCH:
        if min_branch <= number:
            best = cuda
    return f"{best[0]}.{best[1]}" if best else None


def cuda_check(driver_cuda: Any, image_cuda: Any) -> dict[str, Any]:
    """Can a driver whose highest CUDA version is ``driver_cuda`` run an image built for ``image_cuda``?

    Returns ``ok``, both versions as ``MAJOR.MINOR``, and ``min_branch``: the oldest
    driver branch that runs the image (None when the table does not know it yet).
    """
    have = _cuda_tuple(driver_cuda)
    need = _cuda_tuple(image_cuda)
    return {
        "ok": have >= need,
        "driver_cuda": f"{have[0]}.{have[1]}",
        "image_cuda": f"{need[0]}.{need[1]}",
        "min_branch": cuda_min_branch(image_cuda),
    }


def cuda_version_from_image(config: Mapping[str, Any] | None) -> str | None:
    """CUDA version of a container image from ``docker image inspect``'s ``Config``.

    Reads the ``CUDA_VERSION`` environment variable that NVIDIA's CUDA base images
    (and the images built on them, vLLM's included) set, then the labels
    ``com.nvidia.cuda.version`` and ``cuda_version``. Returns ``MAJOR.MINOR`` or None.
    """
    if not config:
        return None
    for item in config.get("Env") or []:
        name, _sep, value = str(item).partition("=")
        if name == "CUDA_VERSION" and _CUDA_RE.match(value):
            major, minor = _cuda_tuple(value)
            return f"{major}.{minor}"
    labels = config.get("Labels") or {}
    for key in ("com.nvidia.cuda.version", "cuda_version"):
        value = labels.get(key)
        if value and _CUDA_RE.match(str(value)):
            major, minor = _cuda_tuple(value)
            return f"{major}.{minor}"
    return None


# --- which GPUs run on which branch --------------------------------------------

# (name pattern, minimum branch): products that need a newer branch than the
# first release of their architecture. First match wins.
PRODUCT_MIN_BRANCH: tuple[tuple[str, int], ...] = (
    (r"\bB300\b|\bGB300\b", 580),
    (r"\bGB10\b", 580),
    (r"RTX PRO \d+ Blackwell", 575),
    (r"\bH200\b|\bGH200\b|\bH20\b", 535),
)

# Architecture: (minimum branch, last branch that supports it or None).
# Maxwell, Pascal and Volta are supported up to the 580 branch; Kepler up to 470.
ARCH_BRANCHES: dict[str, tuple[int, int | None]] = {
    "Kepler": (304, 470),
    "Maxwell": (346, 580),
    "Pascal": (367, 580),
    "Volta": (384, 580),
    "Turing": (410, None),
    "Ampere": (450, None),
    "Ada Lovelace": (525, None),
    "Hopper": (525, None),
    "Blackwell": (570, None),
}

# Compute capability major.minor -> architecture, for GPUs whose facts name none.
_CC_ARCH: tuple[tuple[tuple[int, int], str], ...] = (
    ((3, 0), "Kepler"),
    ((5, 0), "Maxwell"),
    ((6, 0), "Pascal"),
    ((7, 0), "Volta"),
    ((7, 5), "Turing"),
    ((8, 0), "Ampere"),
    ((8, 9), "Ada Lovelace"),
    ((9, 0), "Hopper"),
    ((10, 0), "Blackwell"),
)

# Consumer/workstation Ampere (compute capability 8.6) arrived one branch after the A100.
_CC_MIN_BRANCH: dict[tuple[int, int], int] = {(8, 6): 455}


def gpu_architecture(gpu: Mapping[str, Any]) -> str | None:
    """Architecture of a GPU fact entry: its ``architecture``, else derived from ``compute_capability``."""
    arch = gpu.get("architecture")
    if arch:
        text = str(arch).strip()
        for known in ARCH_BRANCHES:
            if text.lower() == known.lower() or text.lower() == known.split()[0].lower():
                return known
        return text
    cc = gpu.get("compute_capability")
    if not cc:
        return None
    try:
        have = _cuda_tuple(cc)
    except NvidiaHostError:
        return None
    found = None
    for start, name in _CC_ARCH:
        if have >= start:
            found = name
    return found


def gpu_branch_range(gpu: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(minimum branch, last supported branch or None) for one GPU; (None, None) when unknown."""
    name = str(gpu.get("name") or "")
    arch = gpu_architecture(gpu)
    low, high = ARCH_BRANCHES.get(arch or "", (None, None))
    cc = gpu.get("compute_capability")
    if cc and low is not None:
        try:
            low = max(low, _CC_MIN_BRANCH.get(_cuda_tuple(cc), low))
        except NvidiaHostError:
            pass
    for pattern, minimum in PRODUCT_MIN_BRANCH:
        if re.search(pattern, name):
            low = max(low or 0, minimum)
            break
    return low, high


def gpu_branch_problems(gpus: Iterable[Mapping[str, Any]] | None, branch: Any) -> list[str]:
    """One sentence per GPU model that cannot run driver branch ``branch`` (empty: all can)."""
    number = int(check_branch(branch))
    problems: list[str] = []
    seen: set[str] = set()
    for gpu in gpus or []:
        name = str(gpu.get("name") or "unknown GPU")
        if name in seen:
            continue
        seen.add(name)
        low, high = gpu_branch_range(gpu)
        arch = gpu_architecture(gpu) or "unknown architecture"
        if low is not None and number < low:
            problems.append(f"{name} ({arch}) needs driver branch {low} or newer")
        if high is not None and number > high:
            problems.append(f"{name} ({arch}) is not supported after driver branch {high}")
    return problems


def gpu_min_branch(gpus: Iterable[Mapping[str, Any]] | None) -> int | None:
    """Oldest branch every GPU of the list runs on (None when no GPU gives a minimum)."""
    lows = [low for low, _high in (gpu_branch_range(g) for g in gpus or []) if low is not None]
    return max(lows) if lows else None


# Grace Hopper and Grace Blackwell superchips (and GB10): the GPU shares one coherent address space
# with the Grace CPU over NVLink-C2C, on aarch64; NVIDIA drives them with the open kernel modules only.
GRACE_SUPERCHIPS: tuple[tuple[str, str], ...] = (
    (r"\bGH200\b", "Grace Hopper"),
    (r"\bGB200\b|\bGB300\b|\bGB10\b", "Grace Blackwell"),
)


def grace_superchip(gpu: Mapping[str, Any]) -> str | None:
    """'Grace Hopper' or 'Grace Blackwell' for a superchip GPU fact entry, None for other GPUs."""
    name = str(gpu.get("name") or "")
    for pattern, kind in GRACE_SUPERCHIPS:
        if re.search(pattern, name):
            return kind
    return None


def kernel_module_flavor(
    requested: str,
    gpus: Iterable[Mapping[str, Any]] | None,
    branch: Any,
    installed: str | None = None,
) -> str:
    """``open`` or ``proprietary`` kernel modules for a host.

    ``requested`` is ``open``, ``proprietary`` or ``auto``. ``auto`` picks the open modules on
    a Grace Hopper / Grace Blackwell host (the only ones those run, whatever is installed);
    otherwise it keeps the flavour already ``installed``, else picks the open modules on
    branch 560 and newer when every GPU is Turing or newer (NVIDIA's default since 560, and
    the only modules Blackwell runs), else the proprietary ones.
    """
    if requested in ("open", "proprietary"):
        return requested
    if requested != "auto":
        raise NvidiaHostError(
            f"'{requested}' is not a kernel module flavour: expected auto, open or proprietary"
        )
    if any(grace_superchip(g) for g in gpus or []):
        return "open"
    if installed in ("open", "proprietary"):
        return installed
    number = int(check_branch(branch))
    archs = [gpu_architecture(g) for g in gpus or []]
    legacy = {"Kepler", "Maxwell", "Pascal", "Volta"}
    if any(a in legacy for a in archs):
        return "proprietary"
    return "open" if number >= 560 else "proprietary"


def kernel_module_problems(flavor: str, gpus: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """GPU models that cannot run kernel modules of ``flavor`` (empty: all can)."""
    problems: list[str] = []
    seen: set[str] = set()
    for gpu in gpus or []:
        name = str(gpu.get("name") or "unknown GPU")
        arch = gpu_architecture(gpu)
        if name in seen:
            continue
        seen.add(name)
        grace = grace_superchip(gpu)
        if flavor == "proprietary" and grace:
            problems.append(f"{name} ({grace} superchip, aarch64) runs only the open kernel modules")
        elif flavor == "proprietary" and arch == "Blackwell":
            problems.append(f"{name} (Blackwell) runs only the open kernel modules")
        if flavor == "open" and arch in ("Kepler", "Maxwell", "Pascal", "Volta"):
            problems.append(f"{name} ({arch}) runs only the proprietary kernel modules")
    return problems


# --- NVSwitch -------------------------------------------------------------------

# SXM boards that HGX/DGX systems with eight (or sixteen) GPUs connect through NVSwitch.
NVSWITCH_SXM_RE = re.compile(
    r"A100-SXM|A800-SXM|H100 80GB HBM3|H100 SXM|H100-SXM|\bH200\b(?! NVL)|\bH800\b|\bH20\b|"
    r"\bB200\b|\bB300\b|V100-SXM3"
)


def needs_fabricmanager(facts: Mapping[str, Any] | None) -> bool:
    """Does a host need ``nvidia-fabricmanager``? From ``ansible_facts.nvidia_gpu``.

    True when the host owns eight or more GPUs joined by NVSwitch: the facts saw
    NVSwitch links (``topology.nvswitch``) or every GPU is an NVSwitch SXM board
    (8-GPU HGX/DGX A100, H100, H200, B200). A VM or partition that sees fewer GPUs
    of an NVSwitch board (fabric state "Completed") gets its fabric from the Fabric
    Manager of the host or service VM that owns the switches, not from its own.
    """
    if not facts:
        return False
    gpus = facts.get("gpus") or []
    if len(gpus) < 8:
        return False
    topology = facts.get("topology") or {}
    if topology.get("nvswitch") is True:
        return True
    return all(NVSWITCH_SXM_RE.search(str(g.get("name") or "")) for g in gpus)


# --- package state ----------------------------------------------------------------

# dpkg-query -W -f "${Package} ${Version} ${db:Status-Want} ${db:Status-Status}\n" NAMES...
DPKG_QUERY_FORMAT = "${Package} ${Version} ${db:Status-Want} ${db:Status-Status}\n"


def dpkg_status(text: str | None) -> dict[str, dict[str, Any]]:
    """Installed packages from ``dpkg-query -W -f DPKG_QUERY_FORMAT``.

    Returns name -> {version, held}; packages dpkg knows but that are not installed
    (removed, config files only) are left out.
    """
    found: dict[str, dict[str, Any]] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[3] != "installed":
            continue
        name, version, want, _status = parts
        found[name.split(":", 1)[0]] = {"version": version, "held": want == "hold"}
    return found


def installed_packages(text: str | None, manager: str = "apt") -> dict[str, list[dict[str, str]]]:
    """Installed packages in the shape of ``ansible_facts.packages`` (name -> [{version}]).

    ``apt``: the output of ``dpkg-query -W -f DPKG_QUERY_FORMAT``; ``dnf``: the output of
    ``rpm -qa --qf '%{NAME} %{VERSION}\\n'`` (version without release, as RHEL driver
    versions are written: ``580.95.05``). Reading these needs no python3-apt or dnf
    bindings on the host.
    """
    if manager == "apt":
        return {name: [{"version": info["version"]}] for name, info in dpkg_status(text).items()}
    if manager == "dnf":
        found: dict[str, list[dict[str, str]]] = {}
        for line in (text or "").splitlines():
            parts = line.split()
            if len(parts) == 2:
                found.setdefault(parts[0], []).append({"version": parts[1]})
        return found
    raise NvidiaHostError(f"'{manager}' is not a package manager this module reads: expected apt or dnf")


def packages_to_install(
    status: Mapping[str, Any] | None, names: Iterable[str], version: str = ""
) -> list[str]:
    """Of ``names``, those not installed (or, with ``version``, not installed at it)."""
    missing = []
    for name in names:
        have = (status or {}).get(name)
        if not have or (version and have.get("version") != version):
            missing.append(name)
    return missing


def packages_to_hold(status: Mapping[str, Any] | None, names: Iterable[str]) -> list[str]:
    """Of ``names``, those installed but not held."""
    return [n for n in names if (status or {}).get(n) and not (status or {})[n].get("held")]


# --- what the driver role does on a host ----------------------------------------


def installed_versions(packages: Mapping[str, Any] | None, names: Iterable[str]) -> dict[str, str]:
    """Installed version of each of ``names`` found in ``ansible_facts.packages``."""
    found: dict[str, str] = {}
    for name in names:
        entries = (packages or {}).get(name) or []
        if entries:
            found[name] = str(entries[0].get("version", ""))
    return found


def family_packages(packages: Mapping[str, Any] | None, pattern: str, branch: Any) -> list[str]:
    """Installed packages whose name matches ``pattern`` and whose version is of ``branch``."""
    wanted = check_branch(branch)
    regex = re.compile(pattern)
    names = []
    for name, entries in (packages or {}).items():
        if not regex.search(name) or not entries:
            continue
        if branch_of(str(entries[0].get("version", ""))) == wanted:
            names.append(name)
    return sorted(names)


def other_branch_packages(packages: Mapping[str, Any] | None, pattern: str, branch: Any) -> list[str]:
    """Installed packages whose name matches ``pattern`` and carry another driver branch."""
    wanted = check_branch(branch)
    regex = re.compile(pattern)
    names = []
    for name, entries in (packages or {}).items():
        if not regex.search(name) or not entries:
            continue
        have = branch_of(str(entries[0].get("version", "")))
        if have and have != wanted:
            names.append(name)
    return sorted(names)


def driver_plan(
    packages: Mapping[str, Any] | None,
    wanted: Iterable[str],
    branch: Any,
    version: str | None = None,
    kernel_module_version: str | None = None,
    driver_version: str | None = None,
    adopt_external: bool = True,
) -> dict[str, Any]:
    """Decide what the driver role does on one host.

    ``packages`` is ``ansible_facts.packages``; ``wanted`` the driver packages the role
    installs; ``branch``/``version`` what the inventory asks for (``version`` empty: any
    version of the branch); ``kernel_module_version`` the loaded module
    (/proc/driver/nvidia/version) and ``driver_version`` what nvidia-smi reports.

    Returns a dict:

    ``action``
        ``none``: the wanted packages are installed at the wanted branch/version;
        ``install``: install or change the packages; ``external``: the wanted branch
        runs but was not installed from these packages (runfile, image, other
        repository), so it is left alone; ``conflict``: another branch runs from
        outside the package manager, which the role will not replace.
    ``installed``: wanted package -> installed version; ``installed_version``: their
    common version (None when absent or mixed); ``running_version``/``running_branch``:
    the loaded driver; ``pin``: the version pattern for the package manager pin;
    ``reboot``: reasons a reboot will be needed (list); ``reason``: one sentence.
    """
    wanted_branch = check_branch(branch)
    names = list(wanted)
    if not names:
        raise NvidiaHostError("no driver packages to install: the package list is empty")
    exact = str(version).strip() if version else ""
    if exact and branch_of(exact) != wanted_branch:
        raise NvidiaHostError(f"package version '{exact}' is not of driver branch {wanted_branch}")
    installed = installed_versions(packages, names)
    versions = set(installed.values())
    installed_version = versions.pop() if len(versions) == 1 else None
    running = upstream_version(kernel_module_version) or upstream_version(driver_version)
    running_branch = branch_of(running)
    complete = len(installed) == len(names)
    plan: dict[str, Any] = {
        "installed": installed,
        "installed_version": installed_version,
        "running_version": running,
        "running_branch": running_branch,
        "reboot": [],
    }

    current = (
        complete
        and installed_version is not None
        and branch_of(installed_version) == wanted_branch
        and (not exact or installed_version == exact)
    )
    if current:
        plan["action"] = "none"
        plan["pin"] = installed_version
        plan["reason"] = f"driver {installed_version} (branch {wanted_branch}) is installed from packages"
        loaded = upstream_version(kernel_module_version)
        driver = upstream_version(installed_version)
        if loaded and loaded != driver:
            plan["reboot"].append(f"the loaded kernel module {loaded} is not the installed driver {driver}")
        return plan

    if not installed and running_branch == wanted_branch:
        if adopt_external:
            plan["action"] = "external"
            plan["pin"] = None
            plan["reason"] = (
                f"driver {running} (branch {wanted_branch}) runs but was not installed from the packages "
                f"{', '.join(names)}: it is left as it is"
            )
            return plan
        plan["action"] = "conflict"
        plan["pin"] = None
        plan["reason"] = (
            f"driver {running} runs from outside the package manager and adopting it is switched off"
        )
        return plan

    if not installed and running_branch and running_branch != wanted_branch:
        plan["action"] = "conflict"
        plan["pin"] = None
        plan["reason"] = (
            f"driver {running} (branch {running_branch}) runs but was not installed from the packages "
            f"{', '.join(names)}; the role does not replace a driver it did not install"
        )
        return plan

    plan["action"] = "install"
    plan["pin"] = exact or f"{wanted_branch}.*"
    target = upstream_version(exact) if exact else None
    loaded = upstream_version(kernel_module_version)
    if loaded and (target is None or loaded != target):
        plan["reboot"].append(f"the loaded kernel module {loaded} will be replaced")
    if installed:
        have = ", ".join(f"{n} {v}" for n, v in sorted(installed.items()))
        plan["reason"] = f"installed {have}; wanted branch {wanted_branch}" + (
            f" version {exact}" if exact else ""
        )
    else:
        plan["reason"] = f"driver branch {wanted_branch} is not installed"
    return plan
