"""The gateway benchmark's streaming client (httpx) against a local server that streams OpenAI-style SSE."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from gateway_bench import Stream, check_address, run_round  # noqa: E402

KEY = "sk-test"
TOKENS = 5
FIRST_TOKEN_S = 0.08  # the server's delay before the first generated token
GAP_S = 0.03  # between tokens when they are streamed one by one


def _chunk(delta: dict | None = None, usage: dict | None = None) -> bytes:
    event = {"id": "c1", "object": "chat.completion.chunk", "model": "tiny", "choices": []}
    if delta is not None:
        event["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
    if usage is not None:
        event["usage"] = usage
    return b"data: " + json.dumps(event).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked answers, as vLLM and nginx send them
    seen: list[tuple[str, int, dict]] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.seen.append((self.path, self.client_address[1], body))
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            answer = b'{"error": "bad key"}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._send(_chunk({"role": "assistant", "content": ""}))  # the role chunk is not a token
        time.sleep(FIRST_TOKEN_S)
        tokens = [_chunk({"content": f"t{i} "}) for i in range(TOKENS)]
        usage = _chunk(usage={"prompt_tokens": 7, "completion_tokens": TOKENS, "total_tokens": 7 + TOKENS})
        if self.path.startswith("/burst/"):
            self._send(b"".join(tokens) + usage)  # everything at once: a burst
        else:
            for token in tokens:
                self._send(token)
                time.sleep(GAP_S)
            self._send(usage)
        self._send(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def server():
    Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def _one(url: str, key: str = KEY) -> tuple[float, int, bool]:
    stream = Stream(url, key)
    try:
        return await stream.request("tiny", 16)
    finally:
        await stream.close()


def test_streamed_answer_gives_ttft_tokens_and_no_burst(server) -> None:
    ttft, tokens, burst = asyncio.run(_one(server))
    assert FIRST_TOKEN_S <= ttft < FIRST_TOKEN_S + 0.5  # the role chunk before it does not count
    assert tokens == TOKENS  # from the usage chunk
    assert burst is False
    path, _, body = Handler.seen[0]
    assert path == "/v1/chat/completions"
    assert body["stream"] is True and body["ignore_eos"] is True and body["max_tokens"] == 16
    assert body["stream_options"] == {"include_usage": True}


def test_the_trace_event_that_starts_the_clock_exists(server) -> None:
    # Stream.request starts its clock at this httpcore trace event (after any connection set-up)
    import httpx

    names = []

    async def trace(name: str, _info: dict) -> None:
        names.append(name)

    async def go() -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            await client.post(server + "/v1/chat/completions", json={}, extensions={"trace": trace})

    asyncio.run(go())
    assert "http11.send_request_headers.started" in names
    assert names.index("connection.connect_tcp.started") < names.index("http11.send_request_headers.started")


def test_answer_arriving_at_once_is_a_burst(server) -> None:
    ttft, tokens, burst = asyncio.run(_one(server + "/burst"))
    assert ttft >= FIRST_TOKEN_S and tokens == TOKENS
    assert burst is True
    assert Handler.seen[0][0] == "/burst/v1/chat/completions"  # the URL's path prefix is kept


def test_refused_request_raises_with_the_status(server) -> None:
    with pytest.raises(RuntimeError, match="HTTP 401"):
        asyncio.run(_one(server, key="wrong"))


def test_round_keeps_one_connection_per_stream_and_adds_up(server) -> None:
    result = asyncio.run(run_round(server, KEY, "tiny", concurrency=2, per_stream=3, max_tokens=8))
    assert (result.requests, result.failures, result.tokens, result.bursts) == (6, 0, 6 * TOKENS, 0)
    assert len(result.ttft) == 6 and min(result.ttft) >= FIRST_TOKEN_S
    assert result.throughput == pytest.approx(result.tokens / result.seconds)
    assert len({port for _, port, _ in Handler.seen}) == 2  # keep-alive: 6 requests on 2 connections


def test_round_counts_failures(server, capsys) -> None:
    result = asyncio.run(run_round(server, "wrong", "tiny", concurrency=1, per_stream=2, max_tokens=8))
    assert (result.requests, result.failures, result.tokens) == (2, 2, 0)
    assert "HTTP 401" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["http://8.8.8.8:8080", "https://127.0.0.1:8080"])
def test_only_local_http_targets(url: str) -> None:
    with pytest.raises(SystemExit):
        check_address(url)


def test_whole_benchmark_against_one_local_server(server, capsys) -> None:
    import gateway_bench

    argv = ["--gateway", server + "/burst", "--gateway-key", KEY, "--direct", server, "--direct-key", KEY]
    code = gateway_bench.main([*argv, "--concurrency", "1,2", "--requests-per-stream", "2", "--rounds", "2"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 stream(s): throughput gateway/direct" in out and "2 stream(s):" in out
    rows = [
        line.split() for line in out.splitlines() if line.split()[:2] in (["1", "gateway"], ["2", "direct"])
    ]
    assert rows[0][2:4] == ["4", "0"] and rows[0][-1] == "4"  # 2 rounds x 2 requests, all bursts
    assert rows[1][2:4] == ["8", "0"] and rows[1][-1] == "0"
