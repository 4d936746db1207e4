#!/usr/bin/env python3
"""Prefix-cache hit rate through the gateway with cache affinity off and on, over the same workload.

Each phase plays the same multi-turn conversations (each turn sends the whole conversation so far,
as a chat client does) with the official ``openai`` client through the gateway; the "on" phase
sends each conversation's id in the affinity header (the gateway's ``gateway_affinity: {key:
header}``), the "off" phase sends none, which the gateway routes by least connections as when
affinity is off. The hit rate is vLLM's own: the growth of ``vllm:prefix_cache_hits`` over
``vllm:prefix_cache_queries`` (tokens), summed over every backend's ``/metrics`` (parsed with
prometheus_client). The phases use different conversation texts of the same shape, so one phase
never hits the other's cache; the phases alternate (off, on, off, on, ...: --rounds) so that neither
gets a warmer machine. Prints each phase's rate, both modes' rates over all rounds and their ratio.

Usage (control-node venv: eval "$(bin/bootstrap)"):
  benchmarks/affinity_bench.py --gateway http://127.0.0.1:8080 --key CLIENT_KEY \\
      --metrics http://GPU1:8000/metrics --metrics http://GPU2:8000/metrics \\
      [--model tiny] [--conversations 12] [--turns 5] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

WORDS = (
    "river stone cloud paper garden window silver morning engine forest signal harbor lantern "
    "marble orbit pepper violet canyon meadow thunder anchor bridge candle desert falcon glacier "
    "island jungle kettle ladder mirror needle ocean pillar quartz rocket saddle tunnel valley wagon"
).split()


@dataclass
class Counters:
    hits: float = 0.0
    queries: float = 0.0
    requests: float = 0.0


def scrape(url: str) -> Counters:
    """This backend's prefix-cache counters and finished requests (all engines, all models)."""
    with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 - the operator's backend URL
        text = answer.read().decode()
    found = Counters()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "vllm:prefix_cache_hits_total":
                found.hits += sample.value
            elif sample.name == "vllm:prefix_cache_queries_total":
                found.queries += sample.value
            elif sample.name == "vllm:request_success_total":
                found.requests += sample.value
    return found


def conversation(seed: str, turns: int, system_words: int, turn_words: int) -> tuple[str, list[str]]:
    rng = random.Random(seed)
    system = f"Conversation {seed}. You answer briefly. Notes: " + " ".join(
        rng.choice(WORDS) for _ in range(system_words)
    )
    questions = [f"Turn {t}: " + " ".join(rng.choice(WORDS) for _ in range(turn_words)) for t in range(turns)]
    return system, questions


def play(client: OpenAI, args: argparse.Namespace, phase: str, index: int, pinned: bool) -> tuple[int, int]:
    """One conversation, turn after turn; returns the turns answered and the longest prompt (tokens)."""
    system, questions = conversation(
        f"{args.salt}-{phase}-{index}", args.turns, args.system_words, args.turn_words
    )
    messages = [{"role": "system", "content": system}]
    headers = {args.header: f"{args.salt}-{phase}-{index}"} if pinned else {}
    answered = longest = 0
    for question in questions:
        messages.append({"role": "user", "content": question})
        reply = client.chat.completions.create(
            model=args.model,
            messages=messages,
            max_tokens=args.max_tokens,
            temperature=0,
            extra_headers=headers,
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        answered += 1
        longest = max(longest, reply.usage.prompt_tokens if reply.usage else 0)
    return answered, longest


def phase(client: OpenAI, args: argparse.Namespace, name: str, pinned: bool) -> dict[str, Any]:
    before = [scrape(url) for url in args.metrics]
    start = time.monotonic()
    with ThreadPoolExecutor(args.concurrency) as pool:
        played = list(pool.map(lambda i: play(client, args, name, i, pinned), range(args.conversations)))
    seconds = time.monotonic() - start
    time.sleep(args.settle)  # vLLM publishes its counters at the end of an engine step
    after = [scrape(url) for url in args.metrics]
    hits = sum(a.hits - b.hits for a, b in zip(after, before, strict=True))
    queries = sum(a.queries - b.queries for a, b in zip(after, before, strict=True))
    per_backend = [round(a.requests - b.requests) for a, b in zip(after, before, strict=True)]
    return {
        "turns": sum(turns for turns, _ in played),
        "longest_prompt_tokens": max(longest for _, longest in played),
        "seconds": round(seconds, 1),
        "prefix_cache_hits": hits,
        "prefix_cache_queries": queries,
        "hit_rate": hits / queries if queries else 0.0,
        "requests_per_backend": per_backend,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", required=True, help="gateway base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--key", required=True, help="a client key of the gateway")
    parser.add_argument("--metrics", action="append", required=True, help="a backend's /metrics URL")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--header", default="X-Session-Id", help="the gateway's gateway_affinity.header")
    parser.add_argument("--conversations", type=int, default=12)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--system-words", type=int, default=30)
    parser.add_argument("--turn-words", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before the closing scrape")
    parser.add_argument("--salt", default=str(int(time.time())), help="makes this run's texts its own")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    if len(args.metrics) < 2:
        parser.error("give the /metrics of at least two backends: affinity only matters across replicas")
    client = OpenAI(base_url=args.gateway.rstrip("/") + "/v1", api_key=args.key, max_retries=0, timeout=300)
    rounds: list[dict[str, Any]] = []
    for index in range(args.rounds):  # alternated, so that neither mode has the machine warmer
        rounds.append({"off": phase(client, args, f"off{index}", pinned=False)})
        rounds[-1]["on"] = phase(client, args, f"on{index}", pinned=True)
    shape = (
        f"{args.conversations} conversations x {args.turns} turns, {args.concurrency} at a time, "
        f"{len(args.metrics)} backends, {args.rounds} round(s) of off then on"
    )
    print(f"workload: {shape}")
    names = {"off": "affinity off (least connections)", "on": f"affinity on ({args.header})"}
    for index, figures_of in enumerate(rounds):
        for mode, figures in figures_of.items():
            print(
                f"round {index + 1} {names[mode]:34s} hit rate {figures['hit_rate']:6.1%} "
                f"({figures['prefix_cache_hits']:.0f}/{figures['prefix_cache_queries']:.0f} tokens), "
                f"requests per backend {figures['requests_per_backend']}, {figures['turns']} turns in "
                f"{figures['seconds']} s, longest prompt {figures['longest_prompt_tokens']} tokens"
            )
    total = {}
    for mode in ("off", "on"):
        hits = sum(r[mode]["prefix_cache_hits"] for r in rounds)
        queries = sum(r[mode]["prefix_cache_queries"] for r in rounds)
        total[mode] = hits / queries if queries else 0.0
        print(f"all rounds {names[mode]:34s} hit rate {total[mode]:6.1%} ({hits:.0f}/{queries:.0f} tokens)")
    ratio = total["on"] / total["off"] if total["off"] else float("inf")
    print(f"prefix-cache hit rate, affinity on / off: {ratio:.2f}x")
    if args.json:
        print(json.dumps({"workload": shape, "rounds": rounds, "hit_rate": total, "ratio": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
