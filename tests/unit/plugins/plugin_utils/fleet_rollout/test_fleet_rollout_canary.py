"""The rollout gate's canary analysis: the canary against live peers sampled in the same window (issue #26),
and the probe module against local streaming stand-ins."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_rollout.canary_analysis import (
    canary_analysis,
    canary_peer_hosts,
    canary_peers,
    mann_whitney_greater,
    sign_test_greater,
)

ROOT = Path(__file__).resolve().parents[5]
_spec = importlib.util.spec_from_file_location(
    "fleet_rollout_canary_probe", ROOT / "plugins" / "modules" / "fleet_rollout_canary_probe.py"
)
probe_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe_module)


def _draw(seed: int, n: int, scale: float, spread: float = 0.2) -> list[float]:
    rng = random.Random(seed)
    return [round(scale * math.exp(rng.gauss(0, spread)), 4) for _ in range(n)]


def _probe(canary: list[float], peers: dict[str, list[float]], errors: int = 0, warmup: int = 2) -> dict:
    """A probe result whose total_seconds is its ttft plus 50 ms."""

    def both(values: list[float]) -> dict:
        return {"ttft_seconds": values, "total_seconds": [v + 0.05 for v in values]}

    return {
        "samples": {
            m: {"canary": both(canary)[m], "peers": {h: both(v)[m] for h, v in peers.items()}}
            for m in ("ttft_seconds", "total_seconds")
        },
        "errors": {"canary": errors, "peers": {h: 0 for h in peers}},
        "requests": {"canary": len(canary) + errors, "peers": {h: len(v) for h, v in peers.items()}},
        "canary_error": "HTTP 500: boom" if errors else "",
        "warmup": warmup,
    }


# --- the statistics, against values computed by hand (scipy is not on the hosts) -------------------------


def test_mann_whitney_exact_and_normal() -> None:
    # 3 vs 3, every x above every y: U = 9, the one ordering of 20 -> p = 0.05
    assert mann_whitney_greater([4, 5, 6], [1, 2, 3]) == (9.0, pytest.approx(0.05))
    # identical halves interleaved: no evidence
    u, p = mann_whitney_greater([1, 3, 5, 7], [2, 4, 6, 8])
    assert u == 6 and p > 0.5
    # ties take the normal approximation; all equal -> no evidence at all
    assert mann_whitney_greater([1.0] * 30, [1.0] * 30)[1] >= 0.5
    _, p = mann_whitney_greater([2.0] * 30, [1.0] * 30)
    assert p < 1e-6
    assert mann_whitney_greater([], [1.0]) == (0.0, 1.0)


def test_sign_test() -> None:
    assert sign_test_greater([2, 2, 2, 2, 2], 1) == pytest.approx(1 / 32)
    assert sign_test_greater([0.5] * 5, 1) == 1.0


# --- the verdicts ----------------------------------------------------------------------------------------


def test_a_common_load_shift_passes() -> None:
    # issue #26: a loaded machine slows the old and the new version alike (baseline 0.074 s, quiet)
    canary, peer = _draw(1, 10, 1.19), _draw(2, 10, 1.10)
    result = canary_analysis(_probe(canary, {"gpu-2": peer}), {"ttft_seconds": 0.074}, 3.0, 0.0)
    assert result["verdict"] == "pass" and result["ok"] is True
    assert result["reference"] == "peers" and result["peers"] == ["gpu-2"]
    ttft = result["metrics"]["ttft_seconds"]
    assert ttft["n"] == 10 and ttft["n_reference"] == 10 and 0.7 < ttft["ratio"] < 1.6
    assert ttft["p_value"] > 0.5 and ttft["peer_medians"]["gpu-2"] == ttft["reference_median"]
    assert "against live peer(s) gpu-2" in result["reason"]


def test_a_canary_three_times_slower_fails_with_confidence() -> None:
    canary, peers = _draw(3, 10, 0.9, 0.1), {"gpu-2": _draw(4, 10, 0.1, 0.1), "gpu-3": _draw(5, 10, 0.1, 0.1)}
    result = canary_analysis(_probe(canary, peers), None, 3.0, 0.0)
    assert result["verdict"] == "fail" and result["ok"] is False
    ttft = result["metrics"]["ttft_seconds"]
    assert ttft["verdict"] == "fail" and ttft["bound"] > 3.0 and ttft["p_value"] < 0.05
    assert result["peers"] == ["gpu-2", "gpu-3"] and ttft["n_reference"] == 20
    assert "slower with confidence" in result["reason"] and "Mann-Whitney" in result["reason"]


def test_the_floor_keeps_a_tiny_slowdown_in() -> None:
    canary, peer = _draw(3, 10, 0.4, 0.1), _draw(4, 10, 0.1, 0.1)
    assert canary_analysis(_probe(canary, {"p": peer}), None, 3.0, 0.0)["verdict"] == "fail"
    assert canary_analysis(_probe(canary, {"p": peer}), None, 3.0, 1.0)["verdict"] == "pass"


def test_few_noisy_samples_are_inconclusive_and_pass_with_a_warning() -> None:
    # three samples each: even every canary sample above every allowed one is p = 0.05, no confidence
    canary, peer = [0.9, 0.2, 1.5], [0.1, 0.3, 0.05]
    result = canary_analysis(_probe(canary, {"p": peer}), None, 3.0, 0.0, min_samples=3)
    assert result["verdict"] == "inconclusive" and result["ok"] is True
    assert "passed because the canary answered every probe" in result["warning"]
    # below min_samples: inconclusive too, and it says why
    result = canary_analysis(_probe(canary, {"p": peer}), None, 3.0, 0.0)
    assert result["verdict"] == "inconclusive" and "fewer than 5" in result["reason"]
    # the operator can make inconclusive fail
    assert canary_analysis(_probe(canary, {"p": peer}), None, 3.0, 0.0, 5, 0.95, "fail")["ok"] is False


def test_canary_errors_fail_unless_its_peers_fail_as_much() -> None:
    same = _draw(6, 10, 0.2)
    result = canary_analysis(_probe(same, {"p": _draw(7, 10, 0.2)}, errors=3), None, 3.0, 0.0)
    assert result["verdict"] == "fail" and "failed 3 of 13 probes: HTTP 500: boom" in result["reason"]
    probe = _probe(same, {"p": _draw(7, 10, 0.2)}, errors=3)
    probe["errors"]["peers"]["p"] = 5
    result = canary_analysis(probe, None, 3.0, 0.0)
    assert result["verdict"] == "inconclusive" and result["ok"] is False  # it did not answer every probe


def test_no_peer_falls_back_to_the_baseline_with_warmup_and_samples() -> None:
    canary = _draw(8, 10, 0.5, 0.05)
    base = {"ttft_seconds": 0.1, "completion_seconds": 0.15}
    result = canary_analysis(_probe(canary, {}), base, 3.0, 0.0)
    assert result["verdict"] == "fail" and result["reference"] == "baseline" and result["peers"] == []
    assert "baseline recorded at deploy time" in result["reason"] and "after 2 warm-up" in result["reason"]
    assert result["metrics"]["total_seconds"]["reference_median"] == 0.15
    assert canary_analysis(_probe(canary, {}), base, 3.0, 1.0)["verdict"] == "pass"
    # no warm-up, or too few samples: not judged against one quiet sample
    assert canary_analysis(_probe(canary, {}, warmup=0), base, 3.0, 0.0)["verdict"] == "inconclusive"
    assert canary_analysis(_probe(canary[:3], {}), base, 3.0, 0.0)["verdict"] == "inconclusive"
    # nothing recorded either
    result = canary_analysis(_probe(canary, {}), None, 3.0, 0.0)
    assert result["verdict"] == "inconclusive" and result["ok"] is True


def test_a_peer_that_answered_nothing_is_named_not_compared() -> None:
    probe = _probe(_draw(9, 10, 0.5, 0.05), {"down": []})
    probe["errors"]["peers"]["down"] = 10
    result = canary_analysis(probe, {"ttft_seconds": 0.1, "completion_seconds": 0.1}, 3.0, 0.0)
    assert result["reference"] == "baseline" and result["silent_peers"] == ["down"]
    assert "(down did not)" in result["reason"]


def test_the_analysis_is_deterministic_and_refuses_bad_settings() -> None:
    probe = _probe(_draw(1, 10, 0.3), {"p": _draw(2, 10, 0.1)})
    assert canary_analysis(probe, None, 3.0, 0.0) == canary_analysis(probe, None, 3.0, 0.0)
    with pytest.raises(ValueError, match="factor"):
        canary_analysis(probe, None, 0.5)
    with pytest.raises(ValueError, match="confidence"):
        canary_analysis(probe, None, 3.0, 1.0, 5, 1.0)
    with pytest.raises(ValueError, match="inconclusive"):
        canary_analysis(probe, None, 3.0, 1.0, 5, 0.95, "maybe")


def test_canary_peers_prefer_recorded_deployments() -> None:
    endpoints = {
        "gpu-2": [{"name": "llama", "url": "http://b:8000", "image": "", "recorded": False}],
        "gpu-3": [
            {"name": "llama", "url": "http://c:8000", "image": "vllm:0.10", "recorded": True},
            {"name": "qwen", "url": "http://c:8001", "image": "vllm:0.10", "recorded": True},
        ],
        "gpu-4": [
            {"name": "llama", "key": "llama@gpu0-gi1", "url": "http://d:8000", "image": "", "recorded": True}
        ],
        "gpu-5": [{"name": "llama", "url": "", "recorded": False}],
    }
    assert canary_peers(endpoints, ["llama", "mistral"], 2) == {
        "llama": [
            {"host": "gpu-3", "url": "http://c:8000", "image": "vllm:0.10"},
            {"host": "gpu-4/llama@gpu0-gi1", "url": "http://d:8000", "image": ""},
        ],
        "mistral": [],
    }
    assert canary_peers(endpoints, ["llama"], 0) == {"llama": []}


def test_canary_peer_hosts_are_those_still_on_the_version_before() -> None:
    llama, qwen = [{"name": "llama", "port": 8000}], [{"name": "qwen", "port": 8001}]
    models_by_host = {"a": llama, "b": llama, "c": llama + qwen, "d": llama, "e": qwen, "out": llama}
    # b is the canary with its unit [b, d]; a went before; c, e after; "out" is not in this rollout
    plan = {"order": ["a", "b", "d", "c", "e"], "next_index": {"b": 3}, "followers": []}
    assert canary_peer_hosts(plan, "b", ["b", "d"], models_by_host, ["llama", "qwen"], 2) == ["c", "out", "e"]
    assert canary_peer_hosts(plan, "b", ["b", "d"], models_by_host, ["llama"], 1) == ["c"]
    assert canary_peer_hosts({**plan, "followers": ["c"]}, "b", ["b"], models_by_host, ["llama"], 2) == [
        "out"
    ]
    # the last batch: nothing left on the version before but the hosts outside the rollout
    assert canary_peer_hosts({**plan, "next_index": {"e": 5}}, "e", ["e"], models_by_host, ["qwen"]) == []
    assert canary_peer_hosts(None, "a", ["a"], models_by_host, ["llama"], 2) == ["b", "c"]


def test_the_gate_probes_live_peers_and_lets_the_analysis_decide() -> None:
    import yaml

    gate = yaml.safe_load((ROOT / "roles" / "fleet_rollout" / "tasks" / "gate.yml").read_text())
    probe = next(t for t in gate if "vllm_fleet.vllm_fleet.fleet_rollout_canary_probe" in t)
    assert probe["no_log"] is True and probe["loop"] == "{{ __fleet_rollout_gate_probe_models }}"
    judged = [t for t in gate if "fleet_rollout_canary_analysis" in str(t)]
    assert judged and "fleet_rollout_gate_inconclusive" in str(judged[0])
    # the recorded baseline still judges the models the probe does not stream to (pooling models)
    baseline = next(t for t in gate if "fleet_rollout_latency_gate" in str(t))
    assert "reject('in', __fleet_rollout_gate_probe_models)" in baseline["loop"]
    report = (ROOT / "roles" / "fleet_rollout" / "tasks" / "report.yml").read_text()
    assert "__fleet_rollout_gate" in report and "'samples'" in report and "'peers'" in report


# --- the probe module against streaming stand-ins --------------------------------------------------------


class _StandIn(BaseHTTPRequestHandler):
    """A vLLM stand-in: SSE chunks after ``delay`` seconds (a server's ``delay`` and ``jitter``)."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((body, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        if self.server.fail:  # type: ignore[attr-defined]
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": "boom"}')
            return
        delay = self.server.delay * (1 + self.server.rng.uniform(-0.15, 0.15))  # type: ignore[attr-defined]
        time.sleep(delay)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for _ in range(body["max_tokens"]):
            self.wfile.write(b'data: {"choices": [{"text": "x"}]}\n\n')
            self.wfile.flush()
            time.sleep(delay / 10)
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def stand_ins():
    servers = []

    def start(delay: float, fail: bool = False) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
        server.delay, server.fail, server.seen = delay, fail, []  # type: ignore[attr-defined]
        server.rng = random.Random(len(servers))  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start, servers
    for server in servers:
        server.shutdown()
        server.server_close()


def test_probe_interleaves_warms_up_and_sends_the_key(stand_ins) -> None:
    start, servers = stand_ins
    canary, peer = start(0.01), start(0.01)
    result = probe_module.probe(
        canary, [{"host": "gpu-2", "url": peer}], "tiny", "sekret", samples=4, warmup=1
    )
    assert result["requests"] == {"canary": 4, "peers": {"gpu-2": 4}}
    assert result["errors"] == {"canary": 0, "peers": {"gpu-2": 0}}
    assert len(result["samples"]["ttft_seconds"]["canary"]) == 4
    assert len(result["samples"]["total_seconds"]["peers"]["gpu-2"]) == 4
    # the first chunk no later than the end; on a busy machine the client may read every chunk at once
    assert all(
        0 < t <= s
        for t, s in zip(
            result["samples"]["ttft_seconds"]["canary"],
            result["samples"]["total_seconds"]["canary"],
            strict=True,
        )
    )
    for server in servers:
        assert len(server.seen) == 5  # 1 warm-up + 4
        body, auth = server.seen[0]
        assert auth == "Bearer sekret" and body["stream"] is True and body["ignore_eos"] is True
        assert body["temperature"] == 0 and body["max_tokens"] == 4


def test_probe_counts_failures_and_the_module_hides_the_key(stand_ins) -> None:
    start, _ = stand_ins
    result = probe_module.probe(
        start(0.01, fail=True),
        [{"host": "gone", "url": "http://127.0.0.1:9"}],
        "tiny",
        samples=2,
        warmup=1,
        request_timeout=2,
    )
    assert result["errors"] == {"canary": 2, "peers": {"gone": 2}}
    assert result["canary_error"].startswith("HTTP 500") and "gone" in result["peer_errors"]
    assert (
        'api_key=dict(type="str", default="", no_log=True)'
        in (ROOT / "plugins" / "modules" / "fleet_rollout_canary_probe.py").read_text()
    )


def test_a_slow_canary_fails_the_gate(stand_ins) -> None:
    start, _ = stand_ins
    canary, peer = start(0.25), start(0.025)  # 10x: fails however busy the test machine
    result = probe_module.probe(
        canary, [{"host": "gpu-2", "url": peer}], "tiny", samples=8, warmup=1, max_tokens=2
    )
    verdict = canary_analysis(result, None, 3.0, 0.0)
    assert verdict["verdict"] == "fail", verdict["reason"]


def test_the_same_release_on_a_loaded_pair_passes(stand_ins) -> None:
    # both slowed alike (a loaded machine), far above a baseline recorded when it was quiet
    start, _ = stand_ins
    canary, peer = start(0.12), start(0.12)
    result = probe_module.probe(
        canary, [{"host": "gpu-2", "url": peer}], "tiny", samples=8, warmup=1, max_tokens=2
    )
    verdict = canary_analysis(result, {"ttft_seconds": 0.01, "completion_seconds": 0.02}, 3.0, 0.0)
    assert verdict["verdict"] == "pass", verdict["reason"]
    assert verdict["ok"] is True
