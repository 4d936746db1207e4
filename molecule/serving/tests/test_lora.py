"""LoRA adapters through the gateway with the official openai client: answered by name, unknown ones 404."""

from __future__ import annotations

import openai
import pytest
from conftest import VLLM

testinfra_hosts = ["ansible://gateways"]

ADAPTERS = ["tiny-lora-a", "tiny-lora-b"]


@pytest.fixture
def client(gateway_url, keys) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=keys["alice"], max_retries=0, timeout=120)


def test_the_container_serves_the_adapters_read_only_with_lora_sized_from_them(host, engine):
    config = engine.api.inspect_container(VLLM)
    cmd, binds = config["Config"]["Cmd"], config["HostConfig"]["Binds"]
    assert "--enable-lora" in cmd
    assert cmd[cmd.index("--max-loras") + 1] == "2"  # both adapters in one batch
    assert cmd[cmd.index("--max-lora-rank") + 1] == "16"  # ranks 8 and 16
    modules = cmd[cmd.index("--lora-modules") + 1 : cmd.index("--lora-modules") + 3]
    # each on the commit its branch resolved to (refs/main), mounted read-only
    assert modules == [
        "tiny-lora-a=/srv/vf-serve-models/lab/tiny-lora-a/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a",
        "tiny-lora-b=/srv/vf-serve-models/lab/tiny-lora-b/0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b",
    ]
    for module in modules:
        path = module.split("=", 1)[1]
        assert f"{path}:{path}:ro" in binds


def test_models_lists_the_adapters_with_their_base_model(host, client):
    models = client.models.list().data
    assert [m.id for m in models] == ["tiny", *ADAPTERS]
    assert [getattr(m, "parent", None) for m in models] == [None, "tiny", "tiny"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_each_adapter_answers_by_name_through_the_gateway(host, client, adapter):
    reply = client.chat.completions.create(
        model=adapter, messages=[{"role": "user", "content": "Hello"}], max_tokens=6, temperature=0
    )
    assert reply.model == adapter  # vLLM answered with that adapter, not the base model
    assert reply.usage.completion_tokens == 6
    stream = client.completions.create(model=adapter, prompt="Hello", max_tokens=4, stream=True)
    chunks = [c for c in stream]
    assert chunks and all(c.model == adapter for c in chunks)


def test_an_unknown_adapter_is_the_gateways_openai_404(host, client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(
            model="tiny-lora-c", messages=[{"role": "user", "content": "Hello"}], max_tokens=4
        )
    error = caught.value.body
    assert caught.value.status_code == 404
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "tiny-lora-c" in error["message"]
