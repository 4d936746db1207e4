"""Operations reports of vllm-fleet: plan tables, benchmark reports, preflight doctor checks.

Pure Python (standard library only). Imported by the filter plugin
``plugins/filter/vllm_fleet_reports.py``, the ``vllm_fleet_doctor_probe`` module and the
``bin/vllm-fleet-bench-report`` command.
"""
