"""LoRA adapters through the gateway with the official openai client: answered by name, unknown ones 404;
loaded and unloaded at runtime by a run with no restart (test_vllm_server.py: loaded again after restarts)."""

from __future__ import annotations

import json

import openai
import pytest
from conftest import ADAPTERS, GPU, VLLM, explain, inventory_vars, run_playbook, served_adapters

testinfra_hosts = ["ansible://gateways"]

ROOT = "/srv/vf-serve-models"
# prepare.yml makes it beside the declared two; only these tests declare it
THIRD = {"name": "tiny-lora-c", "repo": "lab/tiny-lora-c", "revision": "main"}
THIRD_PATH = f"{ROOT}/lab/tiny-lora-c/0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c"


@pytest.fixture
def client(gateway_url, keys) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway_url}/v1", api_key=keys["alice"], max_retries=0, timeout=120)


def _started(engine) -> str:
    return engine.api.inspect_container(VLLM)["State"]["StartedAt"]


def _converge(*extra: str):
    """serve.yml then gateway.yml: the scenario's converge, the production playbooks."""
    result = run_playbook("molecule/serving/converge.yml", *extra)
    assert result.returncode == 0, explain(result)
    return result


def test_the_container_mounts_the_adapters_root_read_only_with_lora_sized_from_them(host, engine):
    config = engine.api.inspect_container(VLLM)
    cmd, binds = config["Config"]["Cmd"], config["HostConfig"]["Binds"]
    env = dict(item.split("=", 1) for item in config["Config"]["Env"])
    assert "--enable-lora" in cmd
    assert cmd[cmd.index("--max-loras") + 1] == "4"  # both adapters in one batch, room for more
    assert cmd[cmd.index("--max-lora-rank") + 1] == "16"  # ranks 8 and 16
    # loaded through vLLM's API, not on the command: the adapter set is no part of the container
    assert "--lora-modules" not in cmd and env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert f"{ROOT}:{ROOT}:ro" in binds


def test_models_lists_the_adapters_with_their_base_model(host, client, vllm_url, keys):
    models = client.models.list().data
    assert [m.id for m in models] == ["tiny", *ADAPTERS]
    assert [getattr(m, "parent", None) for m in models] == [None, "tiny", "tiny"]
    # each on the commit its branch resolved to (refs/main)
    assert served_adapters(vllm_url, keys["backend"]) == {
        "tiny-lora-a": f"{ROOT}/lab/tiny-lora-a/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a",
        "tiny-lora-b": f"{ROOT}/lab/tiny-lora-b/0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b",
    }


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


def _assert_gateway_404(client: openai.OpenAI, name: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "Hello"}], max_tokens=4
        )
    error = caught.value.body
    assert caught.value.status_code == 404
    assert error["code"] == "model_not_found" and error["param"] == "model"
    # the gateway's own answer (its routes lack the name), not vLLM's "does not exist. Valid aliases: ..."
    assert error["message"] == f"The model `{name}` does not exist or you do not have access to it.", error


def test_an_unknown_adapter_is_the_gateways_openai_404(host, client):
    _assert_gateway_404(client, "tiny-lora-c")


def test_an_adapter_added_and_removed_by_a_serve_run_restarts_nothing(host, engine, client, vllm_url, keys):
    started = _started(engine)
    models = inventory_vars("gpu_nodes")["vllm_server_models"]
    models[0]["adapters"] = [*models[0]["adapters"], THIRD]

    added = _converge("-e", json.dumps({"vllm_server_models": models}))
    assert _started(engine) == started  # the same container: not recreated, not restarted
    assert f"tiny: loaded {THIRD['name']}" in added.stdout
    assert keys["backend"] not in added.stdout + added.stderr
    assert served_adapters(vllm_url, keys["backend"])[THIRD["name"]] == THIRD_PATH
    reply = client.chat.completions.create(
        model=THIRD["name"], messages=[{"role": "user", "content": "Hello"}], max_tokens=6, temperature=0
    )
    assert reply.model == THIRD["name"] and reply.usage.completion_tokens == 6
    assert THIRD["name"] in [m.id for m in client.models.list().data]

    # back to the inventory: the third one is unloaded, the gateway no longer routes it
    removed = _converge()
    assert _started(engine) == started
    assert f"tiny: unloaded {THIRD['name']}" in removed.stdout
    assert sorted(served_adapters(vllm_url, keys["backend"])) == ADAPTERS
    _assert_gateway_404(client, THIRD["name"])
    # nothing left to change: a run after it loads and unloads nothing
    again = run_playbook("playbooks/serve.yml")
    assert again.returncode == 0, explain(again)
    recap = [line for line in again.stdout.splitlines() if line.startswith(GPU)][-1]
    assert "changed=0" in recap, recap
    assert _started(engine) == started
