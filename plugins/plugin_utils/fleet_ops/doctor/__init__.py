"""Preflight doctor: facts in, one result per check out, each with a fix.

Input is one record per host (built by playbooks/doctor.yml from the probe module, the
GPU facts and the host's variables) plus fleet-wide settings and the Hugging Face access
probes. Every check returns results ``{check, host, subject, status, detail, fix}``
with status ``pass``, ``warn``, ``fail`` or ``skip``; a skip always says why.

Host record keys (all optional unless noted):

``host`` (required), ``gpu_node`` (bool), ``writer`` (bool: the host that downloads the
weights), ``probe`` (the ``vllm_fleet_doctor_probe`` result), ``gpu`` (the
``nvidia_gpu`` facts), ``served`` (``vllm_server_models`` of the host), ``stored``
(``model_weights_models`` the host stores: ``{name, repo_id, revision, dir}``),
``storage_root``, ``extra_ports`` (``[{port, owner}]``), ``image`` (the vLLM image),
``image_cuda`` (declared CUDA version of the image), ``gpu_requests`` (bool),
``plan_options``, ``vllm_version``, ``deployed`` (the ``vllm_fleet`` local fact),
``settings`` (the host's thresholds, winning over the fleet-wide ones), ``received_time`` (the
control node's clock when the probe's answer arrived).

The checks live in one module per family; this package re-exports the public API, so callers
keep importing ``fleet_ops.doctor``:

- ``results``: the result record (``result``), the statuses and ``gib``
- ``settings``: ``DEFAULT_SETTINGS`` and the per-host merge (``host_settings``)
- ``plans``: the plan of a served model (``plan_for``) and the planner options (``planner_options``)
- ``containers``: the running vLLM containers a host owns
- ``storage``: disk space for the model folders (``check_disk``, ``model_size``)
- ``memory``: host RAM, /dev/shm and IPC mode (``check_ram``, ``check_shm``)
- ``network``: planned ports (``check_ports``)
- ``hub``: Hugging Face token/access (``hub_requests``, ``hub_results``)
- ``gpu``: NVML mismatch, persistence, ECC, MIG, driver vs image CUDA, container toolkit,
  topology vs TP (``check_gpu_state``, ``check_cuda``, ``check_topology``)
- ``clock``: clock skew and NTP (``check_time``)
- ``targets``: what to probe per host (``targets``)
- ``evaluation``: every check over every record (``evaluate``)
- ``report``: counts and the table (``summary``, ``render``)
"""

from .clock import check_time
from .evaluation import evaluate
from .gpu import check_cuda, check_gpu_state, check_topology
from .hub import hub_requests, hub_results
from .memory import check_ram, check_shm
from .network import check_ports
from .plans import Planner, plan_for, planner_options
from .report import render, summary
from .results import FAIL, GIB, MIB, ORDER, PASS, SKIP, WARN, gib, result
from .settings import DEFAULT_SETTINGS, host_settings
from .storage import check_disk, model_size
from .targets import targets

__all__ = [
    "DEFAULT_SETTINGS",
    "FAIL",
    "GIB",
    "MIB",
    "ORDER",
    "PASS",
    "SKIP",
    "WARN",
    "Planner",
    "check_cuda",
    "check_disk",
    "check_gpu_state",
    "check_ports",
    "check_ram",
    "check_shm",
    "check_time",
    "check_topology",
    "evaluate",
    "gib",
    "host_settings",
    "hub_requests",
    "hub_results",
    "model_size",
    "plan_for",
    "planner_options",
    "render",
    "result",
    "summary",
    "targets",
]
