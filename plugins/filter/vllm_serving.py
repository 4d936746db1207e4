"""Filters for the serving roles (vllm_server, gateway): thin shims over plugins/plugin_utils/fleet_serving.

vllm_serving_command(path, name, host, port, planned_args, extra_args, stop_timeout, vllm_version,
                     lora_modules)
                                                 the `vllm serve` arguments
vllm_serving_hash(value)                         short stable sha256 of any data (the args hash)
vllm_serving_gpu_sets(requests, gpu_count)       disjoint GPU sets for the models of one host
vllm_serving_units(models, nvidia_gpu_facts)     one container per model, one per MIG instance with `mig`
vllm_serving_mig_device_requests(target, driver) Docker device requests for one MIG instance
vllm_serving_ready_timeout(weights_bytes, base, per_gib, maximum)  readiness timeout in seconds
vllm_serving_plan_summary(plan)                  the planner figures kept in the local fact
vllm_serving_kv_cache(log_text)                  KV-cache figures vLLM printed at its last start
vllm_serving_plan_vs_actual(plan, actual)        planned vs measured KV figures with the error
vllm_serving_diagnose(log_text)                  why the last vLLM start failed, with the fix
vllm_serving_update_fact(existing, records, now) the vllm_fleet local fact after a deployment
vllm_serving_rollback_target(fact, name, running_hash, restart)  the recorded version to return to
vllm_serving_address(hostvars[host])            the address vLLM listens on unless recorded (the default)
vllm_serving_endpoints(hostvars[host], models, host)  each model's recorded (else default) address, url
vllm_serving_host_address(hostvars[host], host)  the internal address of a host (exporters, gateways)
vllm_serving_adapters(models, root)              every LoRA adapter of a host's models, flat, with its path
vllm_serving_adapters_resolved(adapters, commits)  adapters pointed at the commits their refs name
vllm_serving_lora(adapters, adapter_configs, vllm_version, root)  per model: LoRA options, modules, mounts
vllm_serving_lora_changes(models_body, model, declared)  the adapters to load and unload at runtime
vllm_serving_model_features(config, tokenizer_config, settings, vllm_version, name)  task, parsers, flags
vllm_serving_kv_offload(models, memtotal_mb, vllm_version, weights, tp, shm)  each model's KV tier in RAM
vllm_serving_platform_problems(images, spec)  what a CPU build of vLLM refuses of a model (sleep, KV tier)
vllm_serving_sleep_host(models, plans, settings)  the sleep controller in front of the models that may sleep
gateway_routes(backends, drained)                one upstream per model over the hosts serving it
gateway_affinity_routes(routes, default, models) the routes that pin a session key to a replica
gateway_replicas_left(models_by_host, drained, host, minimum)  models a drain would leave short
gateway_models(routes)                           the body of GET /v1/models (adapters with their parent)
gateway_clients(keys, tiers)                     client keys as {name, sha256, tier}
gateway_rate_tiers(tiers)                        rate-limit tiers as nginx zones
"""

from __future__ import annotations

from typing import Any

from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import vllm_log
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.filter_errors import wrap_filters
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving import (
    deploy,
    fleet,
    gateway,
    kv_offload,
    lora,
    mig,
    model_features,
    platform,
    sleep_host,
)


class FilterModule:
    """vLLM serving and gateway data."""

    def filters(self) -> dict[str, Any]:
        table = {
            "vllm_serving_command": deploy.vllm_command,
            "vllm_serving_hash": deploy.stable_hash,
            "vllm_serving_gpu_sets": deploy.assign_gpu_sets,
            "vllm_serving_units": mig.serving_units,
            "vllm_serving_mig_device_requests": mig.mig_device_requests,
            "vllm_serving_ready_timeout": deploy.readiness_timeout,
            "vllm_serving_plan_summary": deploy.plan_summary,
            "vllm_serving_update_fact": deploy.update_deployments,
            "vllm_serving_rollback_target": deploy.rollback_target,
            "vllm_serving_kv_cache": vllm_log.parse_kv_cache,
            "vllm_serving_plan_vs_actual": vllm_log.plan_vs_actual,
            "vllm_serving_diagnose": vllm_log.diagnose_failure,
            "vllm_serving_address": fleet.vllm_address,
            "vllm_serving_endpoints": fleet.endpoints,
            "vllm_serving_host_address": fleet.host_address,
            "vllm_serving_adapters": lora.adapters,
            "vllm_serving_adapters_resolved": lora.resolve,
            "vllm_serving_lora": lora.launch,
            "vllm_serving_lora_changes": lora.runtime_changes,
            "vllm_serving_model_features": model_features.model_features,
            "vllm_serving_kv_offload": kv_offload.kv_offload,
            "vllm_serving_platform_problems": platform.problems,
            "vllm_serving_sleep_host": sleep_host.sleep_host,
            "gateway_routes": gateway.routes,
            "gateway_affinity_routes": gateway.affinity_routes,
            "gateway_replicas_left": gateway.replicas_left,
            "gateway_models": gateway.models_list,
            "gateway_clients": gateway.clients,
            "gateway_rate_tiers": gateway.rate_tiers,
        }
        return wrap_filters(table, deploy.ServingError)
