#!/usr/bin/python
"""Test-only module: overlay simulated facts on ansible_facts (tests/hosts/preflight.yml)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: standin_facts
short_description: Overlay simulated facts on a host's facts (tests only)
description:
  - Returns its C(facts) argument as C(ansible_facts), so a test play can run the host preparation
    roles' checks as if the host were another OS or had other GPUs. Changes nothing on the host.
    Used by tests/unit/roles/test_hosts_preflight.py only; never by a production play.
options:
  facts:
    description: Facts to set, without the C(ansible_) prefix.
    type: dict
    required: true
author:
  - vllm-fleet maintainers
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={"facts": {"type": "dict", "required": True}},
        supports_check_mode=True,
    )
    module.exit_json(changed=False, ansible_facts=module.params["facts"])


if __name__ == "__main__":
    main()
