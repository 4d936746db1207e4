"""Action plugin: build the benchmark report on the control node (see the module's documentation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops.report_cli import (
    write_report,
)

ARGUMENT_SPEC = {
    "run_json": {"type": "path", "required": True},
    "out_dir": {"type": "path"},
    "name": {"type": "str", "default": "report"},
}


class ActionModule(ActionBase):
    # the report is made where the plots library and the results are: the controller, whatever the host
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _validated, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if self._task.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: no report written")
            return result
        try:
            written = write_report(
                Path(args["run_json"]), Path(args["out_dir"]) if args["out_dir"] else None, args["name"]
            )
        except (OSError, ValueError) as exc:
            result.update(failed=True, msg=f"vllm_fleet_bench_report: {exc}")
            return result
        result.update(changed=True, **written)
        return result
