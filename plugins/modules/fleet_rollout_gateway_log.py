#!/usr/bin/python
# Copyright: vllm-fleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the gateway's access log from an offset: answers and timings per upstream server."""

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_rollout_gateway_log
short_description: Answers and timings per upstream server from the gateway's access log
description:
  - Reads the nginx access log of the vllm-fleet gateway (log format C(vllm_fleet)) from O(offset) on, and
    returns, per upstream server address, the requests tried, those answered with a 5xx or not answered, the
    successful ones and their header times (time to the first byte of the answer).
  - Used by a rollout's soak to judge a canary against the other servers over the same window.
  - When the log is shorter than O(offset) (it was rotated), reads it from the start.
  - Never changes anything.
options:
  path:
    description: The access log.
    type: path
    default: /var/log/nginx/access.log
  offset:
    description: Byte offset to start from (the size of the log at the start of the window).
    type: int
    default: 0
  max_bytes:
    description: Read at most this many bytes (the newest are kept).
    type: int
    default: 268435456
  resolve:
    description:
      - C(host:port) servers to name as the gateway sees them (nginx logs addresses); returned in RV(resolved)
        with every address the host name resolves to on the gateway.
    type: list
    elements: str
    default: []
author: vllm-fleet maintainers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Read the gateway log of the soak window
  fleet_rollout_gateway_log:
    path: /var/log/nginx/access.log
    offset: "{{ __size_at_start }}"
  delegate_to: "{{ item }}"
  loop: "{{ groups['gateways'] }}"
"""

RETURN = r"""
lines:
  description: Lines in the gateway's format.
  type: int
  returned: always
routed:
  description: Lines that reached an upstream server.
  type: int
  returned: always
client_errors:
  description: Routed requests that ended in a 5xx for the client.
  type: int
  returned: always
upstreams:
  description: Address -> tries, errors, ok, header_time_sum, header_time_count, client_5xx.
  type: dict
  returned: always
size:
  description: Size of the log when read.
  type: int
  returned: always
rotated:
  description: The log was shorter than the offset and was read from the start.
  type: bool
  returned: always
resolved:
  description: The O(resolve) servers and the C(address:port) forms they resolve to.
  type: list
  returned: always
"""

import ipaddress  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils.gateway_access_log import upstream_stats  # noqa: E402


def resolve(servers: list[str]) -> list[str]:
    """Each ``host:port`` and the ``address:port`` forms nginx would log for it."""
    out: list[str] = []
    for server in servers:
        out.append(server)
        host, _sep, port = server.rpartition(":")
        host = host.strip("[]")
        try:
            ipaddress.ip_address(host)
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, int(port), proto=socket.IPPROTO_TCP)
        except (OSError, ValueError):
            continue
        for info in infos:
            address = info[4][0]
            out.append(f"[{address}]:{port}" if ":" in address else f"{address}:{port}")
    return sorted(set(out))


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/var/log/nginx/access.log"),
            offset=dict(type="int", default=0),
            max_bytes=dict(type="int", default=256 * 1024 * 1024),
            resolve=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    offset = max(0, module.params["offset"])
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        module.fail_json(
            msg=f"cannot read the gateway access log {path}: {exc}; set fleet_rollout_gateway_access_log"
        )
    rotated = size < offset
    start = 0 if rotated else offset
    start = max(start, size - module.params["max_bytes"])
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(size - start)
    lines = data.decode("utf-8", "replace").splitlines()
    if start > 0 and start != offset and lines:
        lines = lines[1:]  # the first line was cut
    stats = upstream_stats(lines)
    module.exit_json(
        changed=False, size=size, rotated=rotated, resolved=resolve(module.params["resolve"]), **stats
    )


if __name__ == "__main__":
    main()
