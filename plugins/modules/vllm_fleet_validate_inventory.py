#!/usr/bin/python
# Copyright: vllm-fleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the vllm_fleet_validate_inventory action (it runs on the control node only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_fleet_validate_inventory
short_description: Check the whole inventory on the control node before any host is touched
description:
  - Reads every inventory host's variables (no host is contacted) and checks, all at once, each variable
    against its role's C(meta/argument_specs.yml) (types, choices, required and unknown keys), names in the
    fleet's namespace that no role reads (with the closest known name) or that were removed, and what the
    roles must agree on - every served model declared in C(model_weights_models), hub names and revisions,
    GPU groups with hosts, the backend key and the client keys, rate-limit tiers, ports of one host.
  - Plans each C(fleet_plan_models) entry whose C(config) is a file on the control node and whose group's
    GPU facts are in the fact cache, and fails when that plan is infeasible; the other pairs need the hosts
    and are planned by C(playbooks/plan.yml) (which fails on an infeasible plan) and by the serve stage.
  - What each host serves - adapter names unique and apart from their base model, an adapter trained for
    another base model (its C(adapter_config.json) read where the control node has it), no flag in
    C(extra_args) that the planner, the role or a serving group owns, GPU indexes the host has - and the GPU
    groups (one GPU type each, one per host; GPUs known from cached facts or the lab's C(lab_gpu_profile)),
    and C(gateway_affinity_models) keyed by served names.
  - Each value is rendered for its host; a vault secret without its password, or a lookup of a file that the
    deployment writes later, is not judged. A reference to a variable that is not defined, or a template that
    can never render (a misspelt filter, a syntax error), is a problem.
  - Fails with one line per problem, each naming the inventory file (or C(extra vars (-e)) for a variable
    given as an extra var, which wins over every file), the variable, what is wrong and the fix; a problem
    of a group's variables is told once.
  - Runs on the control node whatever the task's host (an action plugin); never changes anything.
options:
  hosts:
    description: Inventory hosts to check; default every host of the inventory.
    type: list
    elements: str
attributes:
  check_mode:
    support: full
    description: Reads only.
author: vllm-fleet maintainers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Check the inventory
  vllm_fleet.vllm_fleet.vllm_fleet_validate_inventory:
"""

RETURN = r"""
problems:
  description: One line per problem (empty when the inventory is valid).
  type: list
  elements: str
  returned: always
checked:
  description: Number of hosts whose variables were checked.
  type: int
  returned: always
planned:
  description: Number of (GPU group, model) plans made from cached GPU facts.
  type: int
  returned: always
"""
