"""Speculative decoding (#28) as the role renders it, run by the CPU build of vLLM: tiny with ngram
speculation (molecule.yml), a request through the gateway with the official openai client, vLLM's own
spec-decode counters and its "SpecDecoding metrics" log line."""

from __future__ import annotations

import json
import re
import time

import openai
from conftest import VLLM, call

testinfra_hosts = ["ansible://gateways"]

# the n-gram proposer drafts from the prompt: a prompt that repeats itself gives it something to propose
PROMPT = " ".join(["one two three four five six seven eight"] * 12)


def _counters(vllm_url: str) -> dict[str, float]:
    status, _, raw = call(f"{vllm_url}/metrics")
    assert status == 200
    found: dict[str, float] = {}
    for line in raw.decode().splitlines():
        match = re.match(r"(vllm:spec_decode_\w+_total)\{([^}]*)\} (\S+)$", line)
        if match:
            position = re.search(r'position="(\d+)"', match.group(2))
            name = match.group(1) + (f"[{position.group(1)}]" if position else "")
            found[name] = found.get(name, 0.0) + float(match.group(3))
    return found


def test_the_container_runs_the_rendered_speculative_config(engine):
    cmd = engine.api.inspect_container(VLLM)["Config"]["Cmd"]
    config = json.loads(cmd[cmd.index("--speculative-config") + 1])
    assert config == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def test_ngram_drafts_are_verified_through_the_gateway(gateway_url, vllm_url, keys, engine):
    before = _counters(vllm_url)
    client = openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=keys["alice"], max_retries=0, timeout=120)
    done = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=32, temperature=0)
    # random weights: the 32 tokens may decode to no text; their count is what the client parses
    assert done.usage.completion_tokens == 32 and done.choices[0].finish_reason == "length"
    after = _counters(vllm_url)
    drafts = after["vllm:spec_decode_num_drafts_total"] - before.get("vllm:spec_decode_num_drafts_total", 0)
    drafted = after["vllm:spec_decode_num_draft_tokens_total"] - before.get(
        "vllm:spec_decode_num_draft_tokens_total", 0
    )
    accepted = after["vllm:spec_decode_num_accepted_tokens_total"] - before.get(
        "vllm:spec_decode_num_accepted_tokens_total", 0
    )
    assert drafts > 0 and 0 < accepted <= drafted <= 3 * drafts, (drafts, drafted, accepted)
    # one counter per draft position (num_speculative_tokens): what the dashboard's per-position panel reads
    assert {f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{p}]" for p in range(3)} <= set(after)
    # vLLM logs its acceptance every 10 s while it serves
    deadline = time.monotonic() + 20
    while "SpecDecoding metrics: Mean acceptance length" not in engine.containers.get(VLLM).logs().decode():
        assert time.monotonic() < deadline, "no SpecDecoding metrics line in vLLM's log"
        time.sleep(2)
