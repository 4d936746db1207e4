"""Filters of rolling upgrades (playbooks/upgrade.yml, playbooks/rollback.yml): thin shims over
plugin_utils/fleet_rollout. Each filter is documented in its sidecar <name>.yml.

fleet_rollout_plan(members, group_order, models_by_host, min_available, allow_downtime)  hosts and batches
fleet_rollout_default_group(group_names, groups, gpu_group)   a host's rollout group
fleet_rollout_vllm_load(metrics_text, model)                  requests running/waiting on a vLLM server
fleet_rollout_vllm_counters(metrics_text, model)              vLLM counters a soak compares
fleet_rollout_counters_delta(before, after)                   counters over a window
fleet_rollout_latency_gate(measurements, baseline, factor, floor)  readiness latency vs the baseline
fleet_rollout_canary_analysis(probe, baseline, factor, ...)  the canary vs live peers (else the baseline)
fleet_rollout_canary_peer_hosts(plan, host, unit, models_by_host, models, limit)  hosts of the live peers
fleet_rollout_canary_peers(endpoints_by_host, models, limit)  the live peers a canary is compared with
fleet_rollout_failed_checks(results)                          readiness checks that did not pass
fleet_rollout_snapshot(fact)                                  what runs before a change
fleet_rollout_containers(before, fact, declared, prefix)      model -> container name
fleet_rollout_restore_plan(before, fact, running, declared)   what a failed host needs restored
fleet_rollout_readiness_checks(fact, models)                  a completion, or a running container
fleet_rollout_unit(units, host)                               the hosts replaced and restored with a host
fleet_rollout_unit_stragglers(unit, reached, step)            members of a unit that did not pass a step
fleet_rollout_unit_restarts(unit, rollbacks, unchanged)       a member's models restarted with its group
fleet_rollout_unit_restore_verdict(host, unit, errors)        does a host go back in service
fleet_rollout_soak_verdict(gateway, canary, vllm_delta, ...)  the canary's soak result
fleet_rollout_merge_log_stats(parts)                          gateway log stats of several gateways
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import gateway_access_log as access_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout import (
    canary_analysis,
    gates,
    metrics,
    plan,
    units,
)


class FilterModule:
    """Rolling upgrade data."""

    def filters(self) -> dict[str, Any]:
        table = {
            "fleet_rollout_plan": plan.rollout_plan,
            "fleet_rollout_default_group": plan.default_group,
            "fleet_rollout_vllm_load": metrics.vllm_load,
            "fleet_rollout_vllm_counters": metrics.vllm_counters,
            "fleet_rollout_counters_delta": metrics.counters_delta,
            "fleet_rollout_latency_gate": gates.latency_gate,
            "fleet_rollout_canary_analysis": canary_analysis.canary_analysis,
            "fleet_rollout_canary_peers": canary_analysis.canary_peers,
            "fleet_rollout_canary_peer_hosts": canary_analysis.canary_peer_hosts,
            "fleet_rollout_failed_checks": gates.failed_checks,
            "fleet_rollout_snapshot": gates.snapshot,
            "fleet_rollout_containers": gates.containers,
            "fleet_rollout_restore_plan": gates.restore_plan,
            "fleet_rollout_readiness_checks": gates.readiness_checks,
            "fleet_rollout_unit": units.unit_of,
            "fleet_rollout_unit_stragglers": units.stragglers,
            "fleet_rollout_unit_restarts": units.unit_restarts,
            "fleet_rollout_unit_restore_verdict": units.restore_verdict,
            "fleet_rollout_soak_verdict": gates.soak_verdict,
            "fleet_rollout_merge_log_stats": access_log.merge_stats,
        }
        return wrap_filters(table)
