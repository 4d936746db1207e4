"""The fleet as clients see it: the official `openai` client against the lab's gateway, every API feature
the fleet claims, each asserting the shapes the client parses (not only the status).

Needs the lab up (`make lab`); `make test` runs it right after its lab deployment (tests/collection/deploy).
Run by hand: python -m pytest tests/conformance  (env LAB_GATEWAY_URL, default http://127.0.0.1:8080/v1)

The lab serves tiny (a random-weight Llama with Qwen3's template shape: the fleet gives it vLLM's hermes
tool-call parser and qwen3 reasoning parser), its two LoRA adapters, and tiny-embed (an embedding model on
vLLM's pooling runner). Random weights say nothing of quality; what is checked is that every request is
answered in the shape the client library parses, as a cloud API would answer it. A random model never ends
a string by itself, so the tool's parameters are an enum under `strict` (vLLM constrains the call to the
schema) and one call is asked for (`parallel_tool_calls=False`), as agent frameworks send them.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = os.environ.get("LAB_GATEWAY_URL", "http://127.0.0.1:8080/v1")
SERVER = GATEWAY.removesuffix("/v1")
KEY = yaml.safe_load((ROOT / "inventories/lab/group_vars/gateways/gateway.yml").read_text())[
    "gateway_client_keys"
][0]["key"]
# the vLLM containers of the lab (vllm_server_container_prefix: <host>-vllm-)
BACKENDS = (
    "lab-gpu1-vllm-tiny",
    "lab-gpu2-vllm-tiny",
    "lab-gpu2-vllm-tiny-embed",
    "lab-gpu3-vllm-tiny-embed",
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in the unit asked for",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["unit"],
            "additionalProperties": False,
        },
    },
}
HELLO = [{"role": "user", "content": "Hello"}]


def _restarts() -> dict[str, int]:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{.Name}} {{.RestartCount}} {{.State.StartedAt}}", *BACKENDS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[0].lstrip("/"): line.split(" ", 1)[1] for line in out.splitlines()}


@pytest.fixture(scope="session")
def client() -> Iterator[openai.OpenAI]:
    api = openai.OpenAI(base_url=GATEWAY, api_key=KEY, max_retries=0, timeout=120)
    deadline = time.monotonic() + 300  # a lab that was just deployed is ready; a restarted one may not be
    while True:
        try:
            api.chat.completions.create(model="tiny", messages=HELLO, max_tokens=1)
            break
        except openai.APIError:
            if time.monotonic() > deadline:
                raise
            time.sleep(5)
    before = _restarts()
    yield api
    # no request of this suite may have killed or restarted a backend (a logprobs request once did)
    assert _restarts() == before


def _ids(page: Any) -> list[str]:
    return [m.id for m in page.data]


def test_models_lists_every_model_and_adapter(client: openai.OpenAI) -> None:
    ids = _ids(client.models.list())
    assert {"tiny", "tiny-lora-a", "tiny-lora-b", "tiny-embed"} <= set(ids)


def test_chat_completion(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=8)
    assert r.object == "chat.completion" and r.model == "tiny"
    assert isinstance(r.choices[0].message.content, str) and r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage is not None and 0 < r.usage.completion_tokens <= 8


def test_stream_with_usage(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=HELLO,
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert isinstance(text, str)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 8


def test_completions_with_n_seed_stop_and_logprobs(client: openai.OpenAI) -> None:
    r = client.completions.create(
        model="tiny", prompt="Hello", max_tokens=6, n=2, logprobs=2, temperature=1.0
    )
    assert sorted(c.index for c in r.choices) == [0, 1]
    assert all(
        c.logprobs is not None and len(c.logprobs.tokens) == len(c.logprobs.token_logprobs) for c in r.choices
    )
    assert all(len(top) <= 3 for c in r.choices for top in c.logprobs.top_logprobs)  # 2 + the sampled token
    same = [
        client.completions.create(model="tiny", prompt="Hello", max_tokens=8, seed=7, temperature=1.0)
        .choices[0]
        .text
        for _ in range(2)
    ]
    assert same[0] == same[1]
    r = client.completions.create(
        model="tiny", prompt="Hello", max_tokens=32, stop=["e", "a"], temperature=1.0
    )
    assert "e" not in r.choices[0].text and "a" not in r.choices[0].text


def test_chat_logprobs_leave_every_backend_up(client: openai.OpenAI) -> None:
    for _ in range(4):  # both tiny replicas get some (least connections)
        r = client.chat.completions.create(
            model="tiny", messages=HELLO, max_tokens=4, logprobs=True, top_logprobs=2
        )
        content = r.choices[0].logprobs.content
        assert content and all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in content)


def test_max_completion_tokens(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny", messages=HELLO, max_completion_tokens=3, extra_body={"ignore_eos": True}
    )
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"


class Answer(BaseModel):
    ok: bool


def test_structured_output(client: openai.OpenAI) -> None:
    parsed = client.chat.completions.parse(
        model="tiny", messages=HELLO, max_tokens=64, response_format=Answer
    )
    assert isinstance(parsed.choices[0].message.parsed, Answer)
    r = client.chat.completions.create(
        model="tiny", messages=HELLO, max_tokens=64, response_format={"type": "json_object"}
    )
    content = r.choices[0].message.content
    if r.choices[0].finish_reason == "stop":  # a random model may run out of tokens inside the object
        assert isinstance(json.loads(content), dict)
    else:
        assert content.lstrip().startswith("{")


@pytest.mark.parametrize(
    "tool_choice",
    ["required", {"type": "function", "function": {"name": "get_weather"}}],
    ids=["required", "named"],
)
def test_tool_call_is_parsed(client: openai.OpenAI, tool_choice: Any) -> None:
    r = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "What is the weather in Paris, in celsius?"}],
        tools=[WEATHER],
        tool_choice=tool_choice,
        parallel_tool_calls=False,
        # greedy decoding of random weights repeats one whitespace token inside the JSON for ever; a fixed
        # seed keeps the sampled call the same from run to run
        temperature=1,
        seed=1,
        max_tokens=250,
    )
    calls = r.choices[0].message.tool_calls
    assert calls and calls[0].type == "function" and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments)["unit"] in ("celsius", "fahrenheit")
    assert calls[0].id
    # the conversation goes on with the tool's answer, as an agent framework sends it
    follow = client.chat.completions.create(
        model="tiny",
        messages=[
            {"role": "user", "content": "What is the weather in Paris, in celsius?"},
            r.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"},
        ],
        tools=[WEATHER],
        max_tokens=4,
    )
    assert follow.choices[0].message.role == "assistant"


def test_tool_choice_auto_is_accepted(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny", messages=HELLO, tools=[WEATHER], tool_choice="auto", max_tokens=8
    )
    message = r.choices[0].message
    assert message.content is not None or message.tool_calls


def test_reasoning_is_separated(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny",
        messages=HELLO,
        max_tokens=8,
        extra_body={"chat_template_kwargs": {"enable_thinking": True}, "ignore_eos": True},
    )
    extra = r.choices[0].message.model_extra or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    # the generation prompt opened <think> and the random model never closes it: all of it is reasoning;
    # without enable_thinking (the lab's default is off) the same model answers in content
    assert isinstance(reasoning, str) and reasoning
    assert not r.choices[0].message.content


def test_embeddings_float_and_base64(client: openai.OpenAI) -> None:
    r = client.embeddings.create(model="tiny-embed", input=["Hello", "world"], encoding_format="float")
    assert [d.index for d in r.data] == [0, 1]
    vector = r.data[0].embedding
    assert len(vector) == 128 and all(isinstance(x, float) for x in vector)
    assert r.usage.prompt_tokens > 0
    raw = client.embeddings.with_raw_response.create(
        model="tiny-embed", input="Hello", encoding_format="base64"
    )
    encoded = json.loads(raw.http_response.text)["data"][0]["embedding"]
    assert len(base64.b64decode(encoded)) == 128 * 4  # float32
    # the client's default (base64 on the wire, decoded by the library) gives the same vector
    assert client.embeddings.create(model="tiny-embed", input="Hello").data[0].embedding == pytest.approx(
        vector
    )


def test_rerank_and_score(client: openai.OpenAI) -> None:
    # rerank clients (Cohere's and Jina's shapes) call /v1/rerank, /rerank or /v2/rerank; the openai client's
    # post() takes a path under base_url (/v1) or a whole URL
    for path in ("/rerank", f"{SERVER}/rerank", f"{SERVER}/v2/rerank"):
        body = client.post(
            path,
            body={"model": "tiny-embed", "query": "Hello", "documents": ["Hello", "world", "fox"]},
            cast_to=httpx.Response,
        ).json()
        assert sorted(r["index"] for r in body["results"]) == [0, 1, 2]
        assert all(isinstance(r["relevance_score"], float) for r in body["results"])
    for path in ("/score", f"{SERVER}/score"):
        body = client.post(
            path,
            body={"model": "tiny-embed", "text_1": "Hello", "text_2": ["Hello", "world"]},
            cast_to=httpx.Response,
        ).json()
        assert [d["index"] for d in body["data"]] == [0, 1]
        assert all(isinstance(d["score"], float) for d in body["data"])


@pytest.mark.parametrize("adapter", ["tiny-lora-a", "tiny-lora-b"])
def test_lora_adapters_by_name(client: openai.OpenAI, adapter: str) -> None:
    r = client.chat.completions.create(model=adapter, messages=HELLO, max_tokens=4)
    assert r.model == adapter and r.usage.completion_tokens > 0


def _error(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"])
    assert isinstance(exc.message, str) and body["error"]["message"]
    return dict(body["error"])


def test_errors_are_openai_objects(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as unknown_model:
        client.chat.completions.create(model="no-such-model", messages=HELLO, max_tokens=1)
    assert _error(unknown_model.value)["code"] == "model_not_found"
    with pytest.raises(openai.AuthenticationError) as bad_key:
        openai.OpenAI(base_url=GATEWAY, api_key="wrong-key-0123456789", max_retries=0).models.list()
    assert _error(bad_key.value)["code"] == "invalid_api_key"
    with pytest.raises(openai.NotFoundError) as unknown_path:
        client.post("/v1/no-such-endpoint", body={"model": "tiny"}, cast_to=httpx.Response)
    assert _error(unknown_path.value)["code"] == "unknown_url"
    with pytest.raises(openai.NotFoundError) as not_served:
        client.embeddings.create(model="tiny", input="Hello")
    assert "tiny" in _error(not_served.value)["message"]
    with pytest.raises(openai.BadRequestError) as bad_request:
        client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=100000)
    assert _error(bad_request.value)["message"]
    with pytest.raises(openai.NotFoundError) as chat_on_embedder:
        client.chat.completions.create(model="tiny-embed", messages=HELLO, max_tokens=1)
    assert _error(chat_on_embedder.value)["code"] == "unsupported_endpoint"


def test_a_client_that_disconnects_mid_stream(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="tiny", messages=HELLO, max_tokens=200, stream=True, extra_body={"ignore_eos": True}
    )
    for index, _chunk in enumerate(stream):
        if index == 2:
            break
    stream.close()
    r = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=2)
    assert r.choices[0].message.role == "assistant"
