"""One replica over two nodes: the real roles' members, asked through the gateway, then the follower dies."""

from __future__ import annotations

import re
import time

import openai
from conftest import GATEWAY, HTTP_PORT, MEMBERS, NODES, RENDEZVOUS_PORT, VLLM_PORT, call, ip_on

testinfra_hosts = ["ansible://vf-group-gpu1"]
PROM = "/var/lib/prometheus/node-exporter/vllm_watchdog.prom"
LABELS = f'model="tiny",container="{MEMBERS[0]}"'
EXECUTE_TIMEOUT = 30  # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS in molecule.yml
SHUTDOWN_TIMEOUT = 55  # vLLM's --shutdown-timeout (vllm_server_stop_timeout - 5)


def _arg(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{name}\{{{re.escape(LABELS)}\}} (\S+)$", text, re.M)
    assert match, f"{name} missing in:\n{text}"
    return float(match.group(1))


def test_each_member_runs_its_rank_of_one_pipeline(engine):
    master = ip_on(engine, NODES[0])
    for rank, name in enumerate(MEMBERS):
        attrs = engine.api.inspect_container(name)
        cmd = attrs["Config"]["Cmd"]
        assert attrs["State"]["Running"], name
        assert attrs["HostConfig"]["NetworkMode"].startswith("container:")  # in its node's namespace
        assert (_arg(cmd, "--nnodes"), _arg(cmd, "--node-rank")) == ("2", str(rank))
        assert (_arg(cmd, "--master-addr"), _arg(cmd, "--master-port")) == (master, str(RENDEZVOUS_PORT))
        assert _arg(cmd, "--pipeline-parallel-size") == "2" and _arg(cmd, "--tensor-parallel-size") == "1"
        assert ("--headless" in cmd) == (rank == 1)
        env = dict(item.split("=", 1) for item in attrs["Config"]["Env"])
        assert env["VLLM_HOST_IP"] == ip_on(engine, NODES[rank]) and env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_the_gateway_routes_to_rank_0_only(engine):
    upstreams = engine.containers.get(GATEWAY).exec_run(["cat", "/etc/nginx/vllm-fleet/upstreams.conf"])
    text = upstreams.output.decode()
    assert f"{ip_on(engine, NODES[0])}:{VLLM_PORT}" in text, text
    assert ip_on(engine, NODES[1]) not in text, text


def test_a_chat_completion_through_the_gateway_is_answered_by_the_group(engine, keys):
    client = openai.OpenAI(
        base_url=f"http://{ip_on(engine, GATEWAY)}:{HTTP_PORT}/v1", api_key=keys["alice"], max_retries=0
    )
    started = time.monotonic()
    answer = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=8,
        temperature=0,
        timeout=120,
    )
    took = time.monotonic() - started
    print(f"chat completion through the gateway in {took:.2f} s: {answer.choices[0].message.content!r}")
    assert answer.model == "tiny" and answer.choices[0].finish_reason in ("length", "stop")
    assert answer.usage.completion_tokens > 0
    # both stages took part: the follower's worker ran the second half of the layers
    logs = engine.api.logs(MEMBERS[1]).decode(errors="replace")
    assert "Worker_PP1" in logs, logs[-2000:]


def test_killing_the_follower_takes_the_replica_out_of_service(host, engine, keys):
    # the follower's node is gone for good: no restart by the engine
    engine.api.update_container(MEMBERS[1], restart_policy={"Name": "no"})
    engine.api.kill(MEMBERS[1])
    killed = time.monotonic()
    assert not engine.api.inspect_container(MEMBERS[1])["State"]["Running"]
    # the watchdog's 1-token completion to rank 0 gets no answer: the step waits on the dead stage
    host.run("systemctl start vllm-fleet-watchdog.service")
    text = host.file(PROM).content_string
    journal = host.check_output("journalctl -u vllm-fleet-watchdog.service --no-pager -n 20")
    print(f"watchdog after the kill ({time.monotonic() - killed:.0f} s):\n{text}")
    assert _metric(text, "vllm_watchdog_up") == 0, journal
    # inside the startup grace (the ready timeout) a failed check reads "starting" and is not yet counted
    assert re.search(rf"container={MEMBERS[0]} outcome=(fail|starting) reason='timeout'", journal), journal
    # once its step times out, rank 0 stops answering: its own health, and the gateway's route, fail
    gateway = f"http://{ip_on(engine, GATEWAY)}:{HTTP_PORT}"
    rank0 = f"http://{ip_on(engine, NODES[0])}:{VLLM_PORT}"
    deadline = killed + EXECUTE_TIMEOUT + 120
    health = 200
    while time.monotonic() < deadline:
        health, _ = call(f"{rank0}/health", keys["backend"], timeout=5)
        if health != 200:
            break
        time.sleep(3)
    print(f"rank 0 /health {health} {time.monotonic() - killed:.0f} s after the kill")
    assert health != 200
    # rank 0's API server answers 500 (its engine is dead) until it has shut down (--shutdown-timeout),
    # then its container restarts and waits for a follower that never comes: the gateway answers
    # "unavailable" from then on
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    seen: list[tuple[int, int]] = []
    deadline = killed + EXECUTE_TIMEOUT + SHUTDOWN_TIMEOUT + 90
    status = 200
    while time.monotonic() < deadline:
        status, answer = call(f"{gateway}/v1/chat/completions", keys["alice"], body, timeout=30)
        if not seen or seen[-1][0] != status:
            seen.append((status, round(time.monotonic() - killed)))
        if status in (502, 503, 504):
            break
        time.sleep(3)
    print(f"the gateway's answers after the kill (status, seconds): {seen}; last {answer[:160]!r}")
    assert status in (502, 503, 504), seen
    assert all(code != 200 for code, _ in seen), seen
    rank0 = engine.api.inspect_container(MEMBERS[0])
    print(f"rank 0: running={rank0['State']['Running']} restarts={rank0['RestartCount']}")
