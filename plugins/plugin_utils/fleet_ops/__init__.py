"""Operations reports of vllm-fleet: plan tables, benchmark reports, preflight doctor checks.

Pure Python (standard library only). Imported by the filter plugins ``plugins/filter/vllm_fleet_plan_*.py``,
``vllm_fleet_doctor*.py`` and ``vllm_fleet_bench_*.py``, the ``vllm_fleet_doctor_probe`` module and the
``bin/vllm-fleet-bench-report`` command.
"""
