"""Pure logic of the serving layer (vLLM containers, watchdog, gateway).

Stdlib only, no Ansible imports: used by filter plugins on the control node and by
modules on the target hosts (through ``ansible.module_utils.fleet_serving``).
"""
