"""The under-load benchmark's client: what counts as ok, failed and truncated, and where it may send load."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from upgrade_under_load import StreamLoad, check_phase, classify_stream, gate_lines, load_summary  # noqa: E402

CHUNK = b'data: {"id":"c","choices":[{"text":"a","index":0}]}\n'


@pytest.mark.parametrize(
    ("status", "lines", "error", "expected"),
    [
        (200, [CHUNK, b"\n", CHUNK, b"data: [DONE]\n"], None, "ok"),
        (200, [CHUNK, CHUNK], None, "truncated"),  # the stream stopped before [DONE]
        (200, [b"data: [DONE]\n"], None, "truncated"),  # no chunk at all
        (
            200,
            [CHUNK, b'data: {"error": {"message": "engine dead"}}\n', b"data: [DONE]\n"],
            None,
            "truncated",
        ),
        (200, [CHUNK, b"data: {not json\n", b"data: [DONE]\n"], None, "truncated"),
        (200, [CHUNK, b"data: [DONE]\n"], "RemoteDisconnected", "truncated"),
        (503, [], "backend_unavailable", "failed"),
        (None, [], "ConnectionRefusedError", "failed"),
        (429, [], None, "failed"),
    ],
)
def test_classify_stream(status: int | None, lines: list[bytes], error: str | None, expected: str) -> None:
    assert classify_stream(status, lines, error) == expected


@pytest.mark.parametrize("url", ["http://8.8.8.8:8080", "http://example.com:8080"])
def test_load_only_goes_to_loopback_or_private_addresses(url: str) -> None:
    with pytest.raises(SystemExit):
        StreamLoad(url, "key")


def test_load_accepts_the_benchmark_networks() -> None:
    assert StreamLoad("http://172.18.0.5:8080", "key").parts.port == 8080
    assert StreamLoad("http://127.0.0.1:8080", "key").parts.hostname == "127.0.0.1"


def _state(image: str, started: str, version: str) -> dict:
    return {"image": image, "recorded_image": image, "started": started, "running": True, "version": version}


NODES = ["vf-up-bench-gpu1", "vf-up-bench-gpu2", "vf-up-bench-gpu3"]


def _result(name: str, rc: int, after: dict, output: str = "", failed: int = 0) -> dict:
    from upgrade_under_load import LoadStats

    stats = LoadStats(sent=40)
    stats.outcomes["ok"] = 40 - failed
    stats.outcomes["failed"] = failed
    before = {n: _state("a", "t0", "va") for n in NODES}
    return {"name": name, "rc": rc, "before": before, "after": after, "output": output, "load": stats}


BAD_OUTPUT = " ... ".join(
    [
        "Upgrade of vf-up-bench-gpu1",
        "runs the version it ran before again",
        "stops here: 2 host(s) not reached",
    ]
)


@pytest.mark.parametrize(
    ("result", "needle"),
    [
        (_result("upgrade", 0, {n: _state("b", "t1", "vb") for n in NODES}), None),
        (_result("upgrade", 0, {n: _state("b", "t1", "vb") for n in NODES}, failed=1), "1 failed"),
        (_result("upgrade", 2, {n: _state("b", "t1", "vb") for n in NODES}), "the playbook failed"),
        (
            _result(
                "upgrade",
                0,
                {**{n: _state("b", "t1", "vb") for n in NODES}, NODES[2]: _state("a", "t0", "va")},
            ),
            "vf-up-bench-gpu3 do not run b",
        ),  # fmt: skip
        (_result("bad-args", 2, {n: _state("a", "t0", "va") for n in NODES}, BAD_OUTPUT), None),
        (_result("bad-args", 0, {n: _state("a", "t0", "va") for n in NODES}, BAD_OUTPUT), "succeeded"),
        (
            _result(
                "bad-args",
                2,
                {**{n: _state("a", "t0", "va") for n in NODES}, NODES[1]: _state("a", "t9", "va")},
                BAD_OUTPUT,
            ),
            "vf-up-bench-gpu2 was touched",
        ),  # fmt: skip
        (
            _result(
                "bad-args",
                2,
                {**{n: _state("a", "t0", "va") for n in NODES}, NODES[0]: _state("x", "t9", "vx")},
                BAD_OUTPUT,
            ),
            "was not returned",
        ),  # fmt: skip
        (_result("bad-args", 2, {n: _state("a", "t0", "va") for n in NODES}, "boom"), "lacks"),
    ],
)
def test_check_phase(result: dict, needle: str | None) -> None:
    problems = check_phase(result, "a", "b")
    if needle is None:
        assert problems == []
    else:
        assert any(needle in p for p in problems), problems


GROUP_NODES = [*NODES, "vf-up-bench-gpu4"]
PAIR_A = GROUP_NODES[:2]


def _group_result(after: dict, output: str = BAD_OUTPUT, rc: int = 2) -> dict:
    result = _result("follower-fails", rc, after, output)
    result["before"] = {n: _state("a", "t0", "va") for n in GROUP_NODES}
    return result


@pytest.mark.parametrize(
    ("after", "needle"),
    [
        ({n: _state("a", "t0", "va") for n in GROUP_NODES}, None),
        # the whole canary group was restored: its members restarted on the version they ran
        (
            {
                **{n: _state("a", "t0", "va") for n in GROUP_NODES},
                **{n: _state("a", "t5", "va") for n in PAIR_A},
            },
            None,
        ),
        (
            {**{n: _state("a", "t0", "va") for n in GROUP_NODES}, PAIR_A[0]: _state("b", "t5", "vb")},
            "gpu1 was not",
        ),
        (
            {**{n: _state("a", "t0", "va") for n in GROUP_NODES}, PAIR_A[1]: _state("x", "t5", "vx")},
            "gpu2 was not",
        ),
        (
            {**{n: _state("a", "t0", "va") for n in GROUP_NODES}, GROUP_NODES[3]: _state("a", "t5", "va")},
            "gpu4 was",
        ),
    ],
)
def test_check_phase_of_a_canary_group(after: dict, needle: str | None) -> None:
    problems = check_phase(_group_result(after), "a", "b", PAIR_A)
    assert (problems == []) if needle is None else any(needle in p for p in problems), problems


def test_a_canary_group_failure_names_a_member_and_the_hosts_left() -> None:
    after = {n: _state("a", "t0", "va") for n in GROUP_NODES}
    problems = check_phase(_group_result(after, output="stops here: 3 host(s) not reached"), "a", "b", PAIR_A)
    assert any("names none of vf-up-bench-gpu1, vf-up-bench-gpu2" in p for p in problems), problems
    assert any("stops here: 2 host(s)" in p for p in problems), problems


LOST_MESSAGE = (
    "[ERROR]: Task failed: Action failed: Upgrade of vf-up-bench-gpu1 (bench_h200 1/3) failed at "
    '"wait_idle | Stop when the host stopped answering once drained": vf-up-bench-gpu1 stopped '
    "answering once drained: container is paused. vf-up-bench-gpu1 did not answer again within "
    "fleet_rollout_reconnect_timeout (20 s): it stays drained on every gateway (vf-up-bench-"
    "gateway), so no request goes to it, and nothing was changed on it: it still runs a. The upgrade"
    " stops here: 2 host(s) not reached (vf-up-bench-gpu2, vf-up-bench-gpu3) keep their version. "
    "Bring vf-up-bench-gpu1 back, then run playbooks/upgrade.yml again: it finishes the upgrade of "
    "vf-up-bench-gpu1 and puts it back in service; or, to put it back in service as it is: "
    "ansible-playbook playbooks/undrain.yml --limit vf-up-bench-gpu1."
)


def _lost_result(output: str = LOST_MESSAGE, rc: int = 2, **lost: object) -> dict:
    from upgrade_under_load import HostLost

    host = HostLost(NODES[0])
    host.paused_at, host.drained_after, host.undrained = 3.0, True, True
    for key, value in lost.items():
        setattr(host, key, value)
    result = _result("host-lost", rc, {n: _state("a", "t0", "va") for n in NODES}, output)
    result["lost"] = host
    return result


@pytest.mark.parametrize(
    ("result", "needle"),
    [
        (_lost_result(), None),
        (_lost_result(rc=0), "succeeded"),
        (_lost_result(paused_at=None), "never paused"),
        (_lost_result(drained_after=False), "is not drained"),
        (_lost_result(undrained=False), "undrain command"),
        (_lost_result(LOST_MESSAGE.replace("stays drained", "is back")), "lacks 'stays drained"),
        (
            _lost_result(LOST_MESSAGE.replace("--limit vf-up-bench-gpu1", "")),
            "lacks 'ansible-playbook playbooks/undrain",
        ),
        (_lost_result("fatal: [vf-up-bench-gpu1]: UNREACHABLE!"), "lacks 'of vf-up-bench-gpu1 ('"),
    ],
)
def test_check_host_lost(result: dict, needle: str | None) -> None:
    problems = check_phase(result, "a", "b")
    if needle is None:
        assert problems == []
    else:
        assert any(needle in p for p in problems), problems


def test_check_host_lost_other_host_touched() -> None:
    result = _lost_result()
    result["after"][NODES[2]] = _state("a", "t9", "va")
    assert any("vf-up-bench-gpu3 was touched" in p for p in check_phase(result, "a", "b"))


# What the rollout prints of its gates with the repository's ansible.cfg (callback_result_format: yaml)
SAMPLES = '{"ttft_seconds": {"canary": [0.41, 0.39], "peers": {"vf-up-bench-gpu2": [0.05, 0.06]}}}'
SLOW_GATE = f"""
TASK [vllm_fleet.vllm_fleet.fleet_rollout : gate | Show the gate figures] ******
Sunday 06 December 2026  02:51:12 +0000 (0:00:00.010)       0:00:00.010 *******
ok: [vf-up-bench-gpu1] => (item=tiny) =>
    msg: 'vf-up-bench-gpu1 tiny: fail: against live peer(s) vf-up-bench-gpu2 in the same window: ttft_seconds
        canary 0.400s vs peers 0.055s: 7.27x: slower with confidence. Samples (s): {SAMPLES}'

TASK [vllm_fleet.vllm_fleet.fleet_rollout : gate | Require latencies within the allowed factor] ***
failed: [vf-up-bench-gpu1] (item=tiny) => changed=false
"""


def _report(verdicts: dict[str, str]) -> str:
    lines = [
        "TASK [vllm_fleet.vllm_fleet.fleet_rollout : report | Show each host's gate - the verdict] ***",
        "ok: [vf-up-bench-gpu3] => ",
        "    msg:",
    ]
    for node, verdict in verdicts.items():
        lines += [
            f"        {node} tiny:",
            "            peers:",
            "            - vf-up-bench-gpu3",
            "            reason: 'pass: against live peer(s): ttft_seconds canary 0.050s vs peers 0.049s'",
            "            samples:",
            "                ttft_seconds:",
            "                    canary:",
            "                    - 0.05",
            f"            verdict: {verdict}",
        ]
    return "\n".join([*lines, "", "PLAY RECAP ****"])


def test_gate_lines_reads_the_figures_and_the_report() -> None:
    lines = gate_lines(SLOW_GATE + _report({"vf-up-bench-gpu1": "pass"}))
    assert lines[0].startswith("gate: vf-up-bench-gpu1 tiny: fail: ")
    assert "slower with confidence" in lines[0]
    assert lines[0].endswith(f"Samples (s): {SAMPLES}")
    assert len(lines) == 2
    assert lines[1].startswith("report: vf-up-bench-gpu1 tiny: {")
    assert '"verdict": "pass"' in lines[1] and '"canary": [0.05]' in lines[1]


def test_gate_lines_ignores_other_tasks() -> None:
    assert gate_lines("TASK [x : drain | Show]\nok: [h] => \n    msg: drained\n") == []


def test_load_summary() -> None:
    assert load_summary([]) == "load average not sampled"
    assert load_summary([5.0, 1.5, 3.0]).startswith("load average 1.5 to 5.0 (median 3.0) on ")


def test_check_phase_loaded() -> None:
    after = {n: _state("b", "t1", "vb") for n in NODES}
    ok = _result("loaded", 0, after, SLOW_GATE + _report(dict.fromkeys(NODES, "pass")))
    ok["target"] = "b"
    assert check_phase(ok, "a", "b") == []
    failed_one = {**ok, "output": SLOW_GATE + _report({**dict.fromkeys(NODES, "pass"), NODES[1]: "fail"})}
    assert any("no pass of vf-up-bench-gpu2" in p for p in check_phase(failed_one, "a", "b"))
    no_samples = {**ok, "output": _report(dict.fromkeys(NODES, "pass"))}
    assert any("no gate samples" in p for p in check_phase(no_samples, "a", "b"))
    back_to_a = {**ok, "target": "a"}  # the fleet ran b: loaded moves it to the other tag
    assert any("do not run a" in p for p in check_phase(back_to_a, "a", "b"))


def test_check_phase_slower() -> None:
    after = {n: _state("a", "t0", "va") for n in NODES}
    assert check_phase(_result("slower", 2, after, BAD_OUTPUT + SLOW_GATE), "a", "b") == []
    passed = SLOW_GATE.replace("slower with confidence", "slower by the medians, not with confidence")
    problems = check_phase(_result("slower", 2, after, BAD_OUTPUT + passed), "a", "b")
    assert any("not find the canary slower with confidence" in p for p in problems), problems
