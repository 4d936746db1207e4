#!/usr/bin/python
# Copyright: vllm-fleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the vllm_fleet_bench_report action (it runs on the control node only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_fleet_bench_report
short_description: Write the Markdown, JSON and PNG report of a recorded benchmark sweep
description:
  - Reads the C(run.json) that C(playbooks/bench.yml) records (C(settings) and one entry per step of
    C(vllm bench serve) output) and writes C(NAME.md), C(NAME.json) and C(NAME.png) beside it, or in
    O(out_dir).
  - Runs on the control node whatever the task's host (an action plugin); the same code as
    C(bin/vllm-fleet-bench-report).
options:
  run_json:
    description: Path of the recorded sweep on the control node.
    type: path
    required: true
  out_dir:
    description: Folder for the report; default the folder of O(run_json).
    type: path
  name:
    description: Base name of the three files.
    type: str
    default: report
attributes:
  check_mode:
    support: none
    description: In check mode nothing is written.
author: vllm-fleet maintainers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Write the report of a sweep
  vllm_fleet.vllm_fleet.vllm_fleet_bench_report:
    run_json: reports/bench/tiny-20261203T120000Z/run.json
  register: report
"""

RETURN = r"""
knee:
  description: One sentence naming the knee of the sweep (or that there is none).
  type: str
  returned: success
table:
  description: The steps as a plain-text table.
  type: str
  returned: success
markdown:
  description: Path of the Markdown report.
  type: str
  returned: success
json:
  description: Path of the JSON report.
  type: str
  returned: success
plot:
  description: Path of the PNG plot.
  type: str
  returned: success
"""
