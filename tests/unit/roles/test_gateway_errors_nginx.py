"""One error shape: every error a client gets through the gateway is an OpenAI error object, whatever shape
the backend answered in. The gateway role's templates in a real nginx with njs (tests/gateway/render.yml)
in front of a backend that answers as vLLM releases do: FastAPI's {"detail": ...} for a path the model
does not serve, vLLM's {"error": {...}}, the pre-0.10 {"object": "error", ...}, plain text; a stream and a
success pass through untouched.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from test_gateway_affinity_nginx import CLIENT_KEY, Backend, Gateway, _free_ports, nginx_bin  # noqa: F401

# body "fail" -> (status, content type, body) the backend answers
ANSWERS: dict[str, tuple[int, str, bytes]] = {
    "vllm": (
        400,
        "application/json",
        b'{"error":{"message":"max_tokens must be at least 1, got 0.","type":"BadRequestError",'
        b'"param":"max_tokens","code":400}}',
    ),
    "old": (
        400,
        "application/json",
        b'{"object":"error","message":"This model\'s maximum context length is 512 tokens.",'
        b'"type":"BadRequestError","param":null,"code":400}',
    ),
    # vLLM 0.32's answer for a model it does not serve (an adapter unloaded after the routes were written)
    "missing": (
        404,
        "application/json",
        b'{"error":{"message":"The model `tiny-lora-c` does not exist. Valid aliases: tiny.",'
        b'"type":"NotFoundError","param":"model","code":404}}',
    ),
    "validation": (422, "application/json", b'{"detail":[{"loc":["body","n"],"msg":"Input should be > 0"}]}'),
    "text": (500, "text/plain", b"Internal Server Error"),
}


class ShapedBackend(Backend):
    """A model server answering the shapes above, FastAPI's 404 for /v1/embeddings, and an SSE stream."""

    def start(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/v1/embeddings":
                    return self._send(404, "application/json", b'{"detail":"Not Found"}')
                if request.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for i in range(request.get("chunks", 3)):
                        self.wfile.write(f'data: {{"choices":[{{"text":"t{i}"}}]}}\n\n'.encode())
                        self.wfile.flush()
                        time.sleep(request.get("pace", 0))
                    self.wfile.write(b"data: [DONE]\n\n")
                    return None
                if request.get("fail") in ANSWERS:
                    return self._send(*ANSWERS[request["fail"]])
                return self._send(200, "application/json", b'{"object":"chat.completion","choices":[]}')

            def _send(self, status: int, ctype: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.serve(Handler)


@pytest.fixture
def gateway(nginx_bin: str, tmp_path: Path) -> Iterator[Gateway]:  # noqa: F811 - the fixture above
    ports = _free_ports(4)
    backend = ShapedBackend("b1", ports[:3])
    backend.start()
    gw = Gateway(nginx_bin, tmp_path, [backend], ports[-1])
    gw.render(affinity=False)
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()
        backend.stop()


def _post(gw: Gateway, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {CLIENT_KEY}", "Content-Type": "application/json"}
        conn.request("POST", path, json.dumps({"model": "tiny", **body}), headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _error(raw: bytes) -> dict[str, Any]:
    """The error object as the openai client reads it: body["error"] with its four fields."""
    body = json.loads(raw)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return dict(body["error"])


def test_an_endpoint_the_model_does_not_serve_is_an_openai_404(gateway: Gateway) -> None:
    status, headers, raw = _post(gateway, "/v1/embeddings", {"input": "hi"})
    assert status == 404
    assert headers["content-type"] == "application/json"
    error = _error(raw)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "unsupported_endpoint"
    assert "`tiny` does not serve /v1/embeddings" in error["message"]


@pytest.mark.parametrize(
    ("fail", "status", "message", "etype"),
    [
        ("vllm", 400, "max_tokens must be at least 1, got 0.", "BadRequestError"),
        ("old", 400, "This model's maximum context length is 512 tokens.", "BadRequestError"),
        ("validation", 422, '[{"loc":["body","n"],"msg":"Input should be > 0"}]', "invalid_request_error"),
        ("text", 500, "Internal Server Error", "server_error"),
    ],
)
def test_backend_errors_leave_in_the_openai_shape(
    gateway: Gateway, fail: str, status: int, message: str, etype: str
) -> None:
    got, headers, raw = _post(gateway, "/v1/chat/completions", {"fail": fail})
    assert got == status
    assert headers["content-type"] == "application/json"
    error = _error(raw)
    assert error["message"] == message
    assert error["type"] == etype
    assert error["code"] is None  # vLLM's numeric code (the HTTP status) is not an OpenAI code


def test_a_model_the_backend_no_longer_serves_is_model_not_found(gateway: Gateway) -> None:
    """vLLM's 404 for an adapter it unloaded has the code and param of the gateway's own 404."""
    status, _headers, raw = _post(gateway, "/v1/chat/completions", {"fail": "missing"})
    error = _error(raw)
    assert status == 404 and (error["code"], error["param"]) == ("model_not_found", "model")
    assert error["message"] == "The model `tiny-lora-c` does not exist. Valid aliases: tiny."


def test_successes_and_streams_pass_untouched(gateway: Gateway) -> None:
    status, _headers, raw = _post(gateway, "/v1/chat/completions", {})
    assert (status, json.loads(raw)) == (200, {"object": "chat.completion", "choices": []})
    status, headers, raw = _post(gateway, "/v1/completions", {"stream": True})
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = [line for line in raw.decode().split("\n\n") if line]
    assert events == [f'data: {{"choices":[{{"text":"t{i}"}}]}}' for i in range(3)] + ["data: [DONE]"]


def test_stream_chunks_leave_as_the_backend_sends_them(gateway: Gateway) -> None:
    """The error filter sits on every proxied response: a stream still leaves chunk by chunk (a filter that
    held data until the end, or until nginx's postpone_output, would deliver it in one burst)."""
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    body = {"model": "tiny", "stream": True, "chunks": 10, "pace": 0.1}
    start = time.monotonic()
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Authorization": f"Bearer {CLIENT_KEY}"})
    response = conn.getresponse()
    arrivals = []
    while (line := response.fp.readline()) and not line.startswith(b"data: [DONE]"):
        if line.startswith(b"data: {"):
            arrivals.append(time.monotonic() - start)
    conn.close()
    assert len(arrivals) == 10
    # the backend sends one chunk every 0.1 s, the last 0.9 s after the first (a held stream: ~0 s apart)
    assert arrivals[-1] - arrivals[0] > 0.5, arrivals


def test_the_gateways_own_errors_are_openai_shaped(gateway: Gateway) -> None:
    status, _headers, raw = _post(gateway, "/v1/unknown", {})
    assert status == 404 and _error(raw)["code"] == "unknown_url"
    status, _headers, raw = _post(gateway, "/v1/rerank", {"model": "nope", "query": "q", "documents": ["d"]})
    assert status == 404 and _error(raw)["code"] == "model_not_found"
