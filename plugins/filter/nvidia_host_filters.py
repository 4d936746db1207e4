"""Filters for the host preparation roles: thin shims over module_utils/nvidia_host.py.

nvidia_host_branch_of(version)                          driver branch of a driver/package version
nvidia_host_gpu_branch_problems(gpus, branch)           GPU models that cannot run a driver branch
nvidia_host_gpu_min_branch(gpus)                        oldest branch all GPUs run on
nvidia_host_kernel_module_flavor(requested, gpus, branch, installed)  open or proprietary modules
nvidia_host_kernel_module_problems(flavor, gpus)        GPU models that cannot run that flavour
nvidia_host_needs_fabricmanager(facts)                  NVSwitch host (needs nvidia-fabricmanager)
nvidia_host_cuda_check(driver_cuda, image_cuda)         can the driver run an image built for a CUDA
nvidia_host_cuda_min_branch(cuda)                       oldest driver branch that runs a CUDA version
nvidia_host_branch_max_cuda(branch)                     highest CUDA version a branch supports
nvidia_host_image_cuda(config)                          CUDA version of an image (inspect Config)
nvidia_host_driver_plan(packages, wanted, branch, ...)  what the driver role does on a host
nvidia_host_family_packages(packages, pattern, branch)  installed driver packages of a branch
nvidia_host_other_branch_packages(packages, pattern, branch)  installed driver packages of other branches
nvidia_host_dpkg_status(text)                           installed packages from dpkg-query (version, held)
nvidia_host_installed_packages(text, manager)           dpkg-query / rpm -qa output as ansible_facts.packages
nvidia_host_packages_to_install(status, names, version) packages missing or at another version
nvidia_host_packages_to_hold(status, names)             installed packages not held yet
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters

_FILTERS = {
    "nvidia_host_branch_of": nvidia_host.branch_of,
    "nvidia_host_gpu_branch_problems": nvidia_host.gpu_branch_problems,
    "nvidia_host_gpu_min_branch": nvidia_host.gpu_min_branch,
    "nvidia_host_kernel_module_flavor": nvidia_host.kernel_module_flavor,
    "nvidia_host_kernel_module_problems": nvidia_host.kernel_module_problems,
    "nvidia_host_needs_fabricmanager": nvidia_host.needs_fabricmanager,
    "nvidia_host_cuda_check": nvidia_host.cuda_check,
    "nvidia_host_cuda_min_branch": nvidia_host.cuda_min_branch,
    "nvidia_host_branch_max_cuda": nvidia_host.branch_max_cuda,
    "nvidia_host_image_cuda": nvidia_host.cuda_version_from_image,
    "nvidia_host_driver_plan": nvidia_host.driver_plan,
    "nvidia_host_family_packages": nvidia_host.family_packages,
    "nvidia_host_other_branch_packages": nvidia_host.other_branch_packages,
    "nvidia_host_dpkg_status": nvidia_host.dpkg_status,
    "nvidia_host_installed_packages": nvidia_host.installed_packages,
    "nvidia_host_packages_to_install": nvidia_host.packages_to_install,
    "nvidia_host_packages_to_hold": nvidia_host.packages_to_hold,
}


class FilterModule:
    """Driver, CUDA and NVSwitch decisions for NVIDIA GPU hosts."""

    def filters(self) -> dict[str, Any]:
        return wrap_filters(_FILTERS, nvidia_host.NvidiaHostError)
