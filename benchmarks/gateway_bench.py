#!/usr/bin/env python3
"""Time to first token and throughput through the gateway vs straight to vLLM.

Runs the same streaming chat completions (fixed output length: ``ignore_eos`` and
``max_tokens``) at each concurrency, alternating direct and gateway rounds so that
both see the same machine load, and prints the figures and the ratios:
throughput gateway/direct (target >= 0.98x) and TTFT added by the gateway
(target <= 5 ms at 8 streams).

Bounded: a fixed number of requests per stream and a wall-clock budget; only
loopback and private addresses are accepted (lab, CI and test networks).

On one machine the client, nginx and vLLM share the CPUs, and at 8 streams the CPU nginx uses is
taken from vLLM: the ratio then measures the machine, not the gateway. To stand in for separate
hosts, give vLLM and the gateway their own CPUs and run the client beside the gateway, e.g.
  docker update --cpuset-cpus 0 <vllm container>; docker update --cpuset-cpus 1 <gateway host>
  taskset -c 1 benchmarks/gateway_bench.py ...

Usage (with the control-node venv's python, which has httpx: eval "$(bin/bootstrap)"):
  benchmarks/gateway_bench.py --gateway http://GW:8080 --gateway-key KEY \\
      --direct http://GPU:8000 --direct-key BACKEND_KEY [--model tiny] [--concurrency 1,8]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import socket
import statistics
import sys
import time
import urllib.parse
from dataclasses import dataclass, field

import httpx

REQUEST_TIMEOUT_S = 300.0  # the longest wait for the next bytes of an answer


@dataclass
class Result:
    ttft: list[float] = field(default_factory=list)
    bursts: int = 0  # answers whose content arrived all at once (at the source or on the way)
    tokens: int = 0
    seconds: float = 0.0
    failures: int = 0
    requests: int = 0

    def add(self, other: Result) -> None:
        self.ttft += other.ttft
        self.bursts += other.bursts
        self.tokens += other.tokens
        self.seconds += other.seconds
        self.failures += other.failures
        self.requests += other.requests

    @property
    def throughput(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def check_address(url: str) -> tuple[str, int, str]:
    """(host, port, path prefix) of an http URL on a loopback or private address; SystemExit otherwise."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != "http" or not parsed.hostname:
        raise SystemExit(f"{url}: only http://HOST:PORT URLs are supported")
    port = parsed.port or 80
    for info in socket.getaddrinfo(parsed.hostname, port, proto=socket.IPPROTO_TCP):
        address = ipaddress.ip_address(info[4][0])
        if not (address.is_loopback or address.is_private):
            raise SystemExit(
                f"{url}: {address} is not a loopback or private address; this benchmark stays local"
            )
    return parsed.hostname, port, parsed.path.rstrip("/")


class Stream:
    """One keep-alive connection sending streaming chat completions one after another."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url, self.key = base_url.rstrip("/"), key
        # one connection per stream; no proxy from the environment: the targets are local
        self.client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0),
            trust_env=False,
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def request(self, model: str, max_tokens: int) -> tuple[float, int, bool]:
        """(time to first token, completion tokens, burst) of one streaming chat completion.

        ``burst``: the content chunks arrived within 5 % of the request's duration.
        """
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "Tell me about deployment tools."}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"Authorization": f"Bearer {self.key}"}
        url = f"{self.base_url}/v1/chat/completions"
        ttft = None
        last_content = 0.0
        tokens = 0
        start = time.perf_counter()

        async def trace(event: str, _info: dict) -> None:
            # the clock starts as the request is written, after any connection set-up
            nonlocal start
            if event == "http11.send_request_headers.started":
                start = time.perf_counter()

        extensions = {"trace": trace}
        async with self.client.stream(
            "POST", url, json=body, headers=headers, extensions=extensions
        ) as response:
            if response.status_code != 200:
                detail = await response.aread()
                raise RuntimeError(f"HTTP {response.status_code}: {detail[:200]!r}")
            async for line in response.aiter_lines():
                line = line.strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                # a generated token: a delta with "content" (empty for special tokens), not the role chunk
                deltas = [c.get("delta") or {} for c in event.get("choices") or []]
                if any("content" in d and "role" not in d for d in deltas):
                    last_content = time.perf_counter() - start
                    if ttft is None:
                        ttft = last_content
                if event.get("usage"):
                    tokens = int(event["usage"].get("completion_tokens") or 0)
        total = time.perf_counter() - start
        burst = ttft is not None and tokens > 2 and (last_content - ttft) < 0.05 * total
        return (ttft if ttft is not None else total), tokens, burst


async def run_round(
    url: str, key: str, model: str, concurrency: int, per_stream: int, max_tokens: int
) -> Result:
    check_address(url)
    streams = [Stream(url, key) for _ in range(concurrency)]
    result = Result()

    async def worker(stream: Stream) -> None:
        for _ in range(per_stream):
            result.requests += 1
            try:
                ttft, tokens, burst = await stream.request(model, max_tokens)
                result.ttft.append(ttft)
                result.tokens += tokens
                result.bursts += burst
            except (httpx.HTTPError, OSError, RuntimeError, ValueError) as exc:
                result.failures += 1
                print(f"  request failed on {url}: {exc}", file=sys.stderr)

    start = time.perf_counter()
    await asyncio.gather(*(worker(s) for s in streams))
    result.seconds = time.perf_counter() - start
    for stream in streams:
        await stream.close()
    return result


async def main_async(args: argparse.Namespace) -> int:
    targets = {"direct": (args.direct, args.direct_key), "gateway": (args.gateway, args.gateway_key)}
    for url, _ in targets.values():
        check_address(url)
    deadline = time.monotonic() + args.budget_s
    # warm both paths (connections, prefix cache) before measuring
    for url, key in targets.values():
        await run_round(url, key, args.model, 2, 1, args.max_tokens)
    rows = []
    exit_code = 0
    for concurrency in args.concurrency:
        totals = {name: Result() for name in targets}
        for round_index in range(args.rounds):
            order = list(targets) if round_index % 2 == 0 else list(reversed(targets))
            for name in order:
                if time.monotonic() > deadline:
                    print(f"budget of {args.budget_s} s spent; stopping early", file=sys.stderr)
                    break
                url, key = targets[name]
                totals[name].add(
                    await run_round(
                        url, key, args.model, concurrency, args.requests_per_stream, args.max_tokens
                    )
                )
        direct, gateway = totals["direct"], totals["gateway"]
        if direct.failures or gateway.failures:
            exit_code = 1
        ratio = gateway.throughput / direct.throughput if direct.throughput else float("nan")
        added_ms = (
            (statistics.median(gateway.ttft) - statistics.median(direct.ttft)) * 1000
            if (gateway.ttft and direct.ttft)
            else float("nan")
        )
        rows.append((concurrency, direct, gateway, ratio, added_ms))

    print(
        f"model {args.model}, {args.max_tokens} tokens per request, "
        f"{args.requests_per_stream} requests per stream, {args.rounds} alternating rounds"
    )
    print(
        f"{'streams':>7} {'path':>8} {'requests':>8} {'failed':>6} {'TTFT p50 ms':>11} {'TTFT p90 ms':>11} "
        f"{'tokens/s':>9} {'bursts':>6}"
    )
    for concurrency, direct, gateway, _, _ in rows:
        for name, res in (("direct", direct), ("gateway", gateway)):
            print(
                f"{concurrency:>7} {name:>8} {res.requests:>8} {res.failures:>6} "
                f"{percentile(res.ttft, 50) * 1000:>11.1f} {percentile(res.ttft, 90) * 1000:>11.1f} "
                f"{res.throughput:>9.1f} {res.bursts:>6}"
            )
    direct_bursts = sum(row[1].bursts for row in rows)
    if direct_bursts:
        print(
            f"note: {direct_bursts} answers arrived in one burst straight from vLLM: "
            "its host is short of CPU, "
            "so time-to-first-token comparisons are noisy"
        )
    print()
    for concurrency, _, _, ratio, added_ms in rows:
        verdict = ""
        if concurrency == 8:
            ok = ratio >= 0.98 and added_ms <= 5.0
            verdict = "  (targets >= 0.98x, <= 5 ms: " + ("met" if ok else "missed") + ")"
        print(
            f"{concurrency} stream(s): throughput gateway/direct {ratio:.3f}x, "
            f"TTFT added by the gateway {added_ms:+.1f} ms (p50){verdict}"
        )
    return exit_code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", required=True, help="gateway base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--gateway-key", required=True, help="a client key of the gateway")
    parser.add_argument("--direct", required=True, help="vLLM base URL, e.g. http://10.0.0.5:8000")
    parser.add_argument("--direct-key", required=True, help="the vLLM key (vllm_fleet_api_key)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated stream counts (max 32)")
    parser.add_argument(
        "--requests-per-stream", type=int, default=8, help="sequential requests per stream (max 100)"
    )
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens per request (max 1024)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating direct/gateway rounds (max 10)")
    parser.add_argument("--budget-s", type=float, default=300, help="wall-clock budget in seconds (max 1800)")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    if not args.concurrency or not all(1 <= c <= 32 for c in args.concurrency):
        parser.error("--concurrency: stream counts between 1 and 32")
    if not 1 <= args.requests_per_stream <= 100 or not 1 <= args.max_tokens <= 1024:
        parser.error("--requests-per-stream must be 1-100 and --max-tokens 1-1024")
    if not 1 <= args.rounds <= 10 or not 0 < args.budget_s <= 1800:
        parser.error("--rounds must be 1-10 and --budget-s at most 1800")
    return args


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
