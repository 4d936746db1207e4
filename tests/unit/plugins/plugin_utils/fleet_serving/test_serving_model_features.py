"""model_features: per-model vLLM flags for tool calls, reasoning and pooling, on real model files.

tests/data/model-features/<model>/{config.json,tokenizer_config.json} are the real files (or the real parts
of them, see SOURCES.md there); expected.yml holds the flags vLLM's docs call for, with the doc section.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.deploy import ServingError
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.model_features import (
    model_features,
)

DATA = Path(__file__).resolve().parents[4] / "data" / "model-features"
EXPECTED: dict[str, dict[str, Any]] = yaml.safe_load((DATA / "expected.yml").read_text())


def _files(model: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    folder = DATA / model
    config = json.loads((folder / "config.json").read_text())
    tokenizer = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(tokenizer.read_text()) if tokenizer.exists() else None
    jinja = folder / "chat_template.jinja"
    if jinja.exists():  # the caller puts a separate template where tokenizer_config.json's would be
        tokenizer_config = {**(tokenizer_config or {}), "chat_template": jinja.read_text()}
    return config, tokenizer_config


def test_every_model_folder_has_an_expectation() -> None:
    assert {p.name for p in DATA.iterdir() if p.is_dir()} == set(EXPECTED)


def test_the_table_holds_at_least_25_sourced_models() -> None:
    folders = {p.name for p in DATA.iterdir() if p.is_dir()}
    sources = (DATA / "SOURCES.md").read_text()
    assert len(folders) >= 25
    assert [name for name in sorted(folders) if f"| `{name}` |" not in sources] == []


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_real_model_gets_the_documented_flags(model: str) -> None:
    case = EXPECTED[model]
    config, tokenizer_config = _files(model)
    settings, version = case.get("settings"), case.get("vllm", "0.34.0")
    result = model_features(config, tokenizer_config, settings, version, model)
    assert result["task"] == case["task"]
    assert result["tool_call_parser"] == case.get("tool_call_parser")
    assert result["reasoning_parser"] == case.get("reasoning_parser")
    assert result["args"] == case["args"]
    assert set(result["reasons"]) >= {"task", "chat_template"}


# --- overrides and releases, on the real files above ------------------------------------------------

R1_DISTILL = "deepseek-ai__DeepSeek-R1-Distill-Qwen-32B"
GPT_OSS = "openai__gpt-oss-20b"
# Minimal configs holding only what pooling detection reads (architectures, model_type); not model files.
BGE_M3 = {"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta"}
BGE_RERANKER = {"architectures": ["XLMRobertaForSequenceClassification"], "model_type": "xlm-roberta"}
QWEN3_CAUSAL = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
HERMES_TEMPLATE = {"chat_template": "... within <tool_call></tool_call> XML tags ..."}


def test_tool_calling_can_be_switched_off() -> None:
    result = model_features(*_files(GPT_OSS), {"tool_call_parser": False}, "0.34.0", "oss")
    assert result["tool_call_parser"] is None
    assert result["args"] == ["--reasoning-parser", "openai_gptoss"]
    assert "false" in result["reasons"]["tool_call_parser"]


def test_reasoning_can_be_switched_off() -> None:
    result = model_features(*_files(R1_DISTILL), {"reasoning_parser": False}, "0.34.0", "r1")
    assert result["reasoning_parser"] is None and result["args"] == []


def test_an_explicit_parser_wins_over_detection() -> None:
    result = model_features(*_files(R1_DISTILL), {"tool_call_parser": "deepseek_v3"}, "0.34.0", "r1")
    assert result["args"][:3] == ["--enable-auto-tool-choice", "--tool-call-parser", "deepseek_v3"]
    assert result["reasons"]["tool_call_parser"] == "set by vllm_server_models[].tool_call_parser"


def test_an_unknown_parser_names_the_variable_and_the_valid_names() -> None:
    with pytest.raises(ServingError) as err:
        model_features(*_files(R1_DISTILL), {"tool_call_parser": "hermes3"}, "0.32.0", "r1")
    message = str(err.value)
    assert message.startswith("vllm_server_models[r1].tool_call_parser: vLLM 0.32.0 has no 'hermes3'")
    assert "hermes, hunyuan_a13b, internlm" in message and "llama3_json" in message


def test_a_parser_newer_than_the_release_is_an_error_when_asked_for() -> None:
    with pytest.raises(ServingError, match=r"reasoning_parser: vLLM 0.9.2 has no 'qwen3'"):
        model_features(*_files(R1_DISTILL), {"reasoning_parser": "qwen3"}, "0.9.2", "r1")


def test_a_detected_parser_the_release_lacks_is_dropped_with_a_reason() -> None:
    result = model_features(*_files(GPT_OSS), None, "0.9.2", "oss")
    assert result["tool_call_parser"] is None and result["reasoning_parser"] is None
    assert "dropped: vLLM 0.9.2 has no 'openai'" in result["reasons"]["tool_call_parser"]
    assert result["args"] == []


def test_reasoning_needs_enable_reasoning_before_0_9() -> None:
    result = model_features(*_files(R1_DISTILL), None, "0.8.5", "r1")
    assert result["args"] == ["--enable-reasoning", "--reasoning-parser", "deepseek_r1"]


def test_gpt_oss_reasoning_parser_has_the_name_of_its_release() -> None:
    config, tokenizer_config = _files(GPT_OSS)
    assert model_features(config, tokenizer_config, None, "0.10.1.1")["reasoning_parser"] == "GptOss"
    assert model_features(config, tokenizer_config, None, "0.10.2")["reasoning_parser"] == "openai_gptoss"


def test_llama4_takes_the_pythonic_parser_with_vllms_pythonic_template() -> None:
    config, tokenizer_config = _files("meta-llama__Llama-4-Scout-17B-16E-Instruct")
    path = "/vllm-workspace/examples/tool_chat_template_llama4_pythonic.jinja"
    result = model_features(config, tokenizer_config, {"chat_template": path}, "0.34.0")
    assert result["args"] == [
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "llama4_pythonic",
        "--chat-template",
        path,
    ]
    assert result["chat_template"] == path


def test_a_chat_template_comes_only_from_the_settings() -> None:
    config, tokenizer_config = _files(R1_DISTILL)
    result = model_features(config, tokenizer_config, None, "0.34.0")
    assert "--chat-template" not in result["args"] and result["chat_template"] is None


def test_a_named_template_list_is_read_whole() -> None:
    listed = {
        "chat_template": [
            {"name": "default", "template": "x"},
            {"name": "tool_use", "template": "<tool_call>"},
        ]
    }
    assert model_features(QWEN3_CAUSAL, listed, None, "0.34.0")["tool_call_parser"] == "hermes"


@pytest.mark.parametrize(
    ("config", "settings", "version", "args"),
    [
        (BGE_M3, None, "0.10.0", ["--task", "embed"]),
        (BGE_M3, None, "0.10.1", ["--runner", "pooling"]),
        (BGE_RERANKER, None, "0.8.5", ["--task", "score"]),
        (BGE_RERANKER, None, "0.32.0", ["--runner", "pooling"]),
        (QWEN3_CAUSAL, {"task": "embed"}, "0.9.2", ["--task", "embed"]),
        (QWEN3_CAUSAL, {"task": "embed"}, "0.32.0", ["--runner", "pooling", "--convert", "embed"]),
    ],
)
def test_pooling_flags_follow_the_release(
    config: dict[str, Any], settings: dict[str, Any] | None, version: str, args: list[str]
) -> None:
    assert model_features(config, None, settings, version, "m")["args"] == args


def test_a_qwen3_reranker_loads_as_a_sequence_classifier() -> None:
    args = model_features(QWEN3_CAUSAL, None, {"task": "score"}, "0.34.0", "rerank")["args"]
    assert args[0] == "--hf-overrides" and '"Qwen3ForSequenceClassification"' in args[1]
    assert args[2:] == ["--runner", "pooling"]


def test_a_generative_config_named_like_an_embedding_model_says_to_set_the_task() -> None:
    result = model_features(QWEN3_CAUSAL, HERMES_TEMPLATE, None, "0.34.0", "qwen3-embedding")
    assert result["task"] == "generate"
    assert "set task: embed" in result["reasons"]["task"]


def test_endpoints_per_task() -> None:
    assert model_features(BGE_M3, None, None, "0.34.0")["endpoints"][0] == "/v1/embeddings"
    assert "/v1/rerank" in model_features(BGE_RERANKER, None, None, "0.34.0")["endpoints"]
    chat = model_features(*_files(R1_DISTILL), None, "0.34.0")["endpoints"]
    assert chat == ["/v1/chat/completions", "/v1/completions"]


def test_bad_task_is_refused() -> None:
    with pytest.raises(ServingError, match=r"\.task must be one of"):
        model_features(*_files(R1_DISTILL), {"task": "classify"}, "0.34.0", "r1")


def test_releases_before_0_8_are_refused() -> None:
    with pytest.raises(ServingError, match=r"before 0\.8\.0 are not supported"):
        model_features(*_files(R1_DISTILL), None, "0.7.3", "r1")


def test_a_hybrid_thinking_template_of_another_family_takes_the_qwen3_parser() -> None:
    # the lab's tiny (a Llama) with Qwen3's template shape: thinking unless enable_thinking is false, where
    # deepseek_r1 would put a non-thinking turn's whole answer in reasoning_content
    template = (
        "{% if add_generation_prompt %}<|assistant|>\n"
        "{% if enable_thinking is not defined or enable_thinking %}<think>\n"
        "{% else %}<think>\n\n</think>\n\n{% endif %}{% endif %}<tool_call>"
    )
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    features = model_features(llama, {"chat_template": template}, {}, "0.32.0")
    assert (features["tool_call_parser"], features["reasoning_parser"]) == ("hermes", "qwen3")
    assert "enable_thinking" in features["reasons"]["reasoning_parser"]
