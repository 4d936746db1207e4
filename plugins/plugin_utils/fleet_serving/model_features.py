"""Which `vllm serve` flags make a model's OpenAI API edges work: tool calls, reasoning, pooling tasks.

Exports:
  model_features(config, tokenizer_config, settings, vllm_version, served_name) -> dict
      the task, the tool-call and reasoning parsers, the chat template, the flags and the endpoints of one
      model, with one line per choice saying why, and the planner options that size it (plan_options)
  parser_choices(help_text) -> frozenset[str]
      the ``--tool-call-parser`` choices a release's ``vllm serve --help=all`` prints
  parser_table_drift(help_text, version) -> list[str]
      the tool-call parsers TOOL_PARSERS says ``version`` has that its help does not offer
  TOOL_PARSERS, REASONING_PARSERS
      parser name -> (first release that has it, first release that no longer has it or None)
  MIN_VERSION
      the oldest release accepted (0.8.0)

Sources: vLLM docs/features/tool_calling.md and docs/features/reasoning_outputs.md name the parser of each
model family; the release of each name is the oldest versioned vLLM page found that shows it (see the
comments in the tables), so a release is never claimed earlier than evidence shows. A parser the inventory
names must be in the release (ServingError otherwise); a detected one the release lacks is dropped, with a
reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..fleet_planner.errors import PlanInputError
from ..fleet_planner.versions import Version, parse_version
from .deploy import ServingError
from .sleep import sleep_launch
from .speculative import speculative_config

MIN_VERSION: Version = (0, 8, 0)

# name -> (first release, first release without it). Evidence: docs.vllm.ai versioned pages.
TOOL_PARSERS: dict[str, tuple[Version, Version | None]] = {
    # in the v0.8.x tool_calling.md and the v0.9.0 api index; all predate 0.8 (the floor here)
    "hermes": ((0, 8, 0), None),
    "mistral": ((0, 8, 0), None),
    "llama3_json": ((0, 8, 0), None),
    "internlm": ((0, 8, 0), None),
    "jamba": ((0, 8, 0), None),
    "granite": ((0, 8, 0), None),
    "granite-20b-fc": ((0, 8, 0), None),
    "pythonic": ((0, 8, 0), None),
    # v0.9.0 api/vllm/entrypoints/openai/tool_parsers index
    "llama4_pythonic": ((0, 9, 0), None),
    "phi4_mini_json": ((0, 9, 0), None),
    "deepseek_v3": ((0, 9, 0), None),
    # v0.9.2: llama_tool_parser registers llama4_json; index lists xlam and minimax
    "llama4_json": ((0, 9, 2), None),
    "xlam": ((0, 9, 2), None),
    # v0.10.2 api index (__all__ lists them; gpt-oss's parser is "openai")
    "deepseek_v31": ((0, 10, 2), None),
    "glm45": ((0, 10, 2), None),
    "hunyuan_a13b": ((0, 10, 2), None),
    "kimi_k2": ((0, 10, 2), None),
    "openai": ((0, 10, 2), None),
    "qwen3_coder": ((0, 10, 2), None),
    "seed_oss": ((0, 10, 2), None),
    "step3": ((0, 10, 2), None),
    # v0.15.0 api/vllm/tool_parsers (_TOOL_PARSERS_TO_REGISTER)
    "qwen3_xml": ((0, 15, 0), None),
    "glm47": ((0, 15, 0), None),
    "deepseek_v32": ((0, 15, 0), None),
    "ernie45": ((0, 15, 0), None),
    "functiongemma": ((0, 15, 0), None),
    "gigachat3": ((0, 15, 0), None),
    "longcat": ((0, 15, 0), None),
    "olmo3": ((0, 15, 0), None),
    "minimax_m2": ((0, 15, 0), None),
    # the 0.32.0 `vllm serve --help=all` captured in tests/data/vllm-release/0.32.0
    "granite4": ((0, 32, 0), None),
    "apertus": ((0, 32, 0), None),
    "cohere_command3": ((0, 32, 0), None),
    "gemma4": ((0, 32, 0), None),
    "qwen3_json": ((0, 32, 0), None),
}

REASONING_PARSERS: dict[str, tuple[Version, Version | None]] = {
    "deepseek_r1": ((0, 8, 0), None),  # v0.7.2 reasoning_outputs.md
    "granite": ((0, 8, 3), None),  # v0.8.3 reasoning_outputs.md
    "qwen3": ((0, 10, 0), None),  # v0.10.0 reasoning_outputs.md
    "hunyuan_a13b": ((0, 10, 0), None),  # v0.10.0 reasoning_outputs.md
    # gpt-oss: registered as "GptOss" in 0.10.1.1, renamed "openai_gptoss" in 0.10.2 (api pages of each)
    "GptOss": ((0, 10, 1), (0, 10, 2)),
    "openai_gptoss": ((0, 10, 2), None),
    # v0.11.2 reasoning_outputs.md table
    "deepseek_v3": ((0, 11, 2), None),
    "glm45": ((0, 11, 2), None),
    "ernie45": ((0, 11, 2), None),
    "minimax_m2_append_think": ((0, 11, 2), None),
    # v0.12.0 api/vllm/reasoning (_REASONING_PARSERS_TO_REGISTER)
    "kimi_k2": ((0, 12, 0), None),
    "mistral": ((0, 12, 0), None),
    "olmo3": ((0, 12, 0), None),
    "seed_oss": ((0, 12, 0), None),
    "step3": ((0, 12, 0), None),
}

# Before 0.9 a reasoning parser only ran with --enable-reasoning (v0.8.3 docs); 0.10.0's docs drop it.
ENABLE_REASONING_UNTIL: Version = (0, 9, 0)
# 0.10.1 replaced --task with --runner/--convert (pooling_models.md of v0.10.1.1); 0.32.0 has no --task.
RUNNER_SINCE: Version = (0, 10, 1)

TASKS = ("generate", "embed", "score")
_GENERATE_ENDPOINTS = ["/v1/chat/completions", "/v1/completions"]
# docs/serving/openai_compatible_server.md: the Score and Re-rank APIs take an embedding model or a
# cross-encoder; embeddings come from embedding models only.
_SCORE_ENDPOINTS = ["/v1/score", "/score", "/v1/rerank", "/rerank", "/v2/rerank"]
_EMBED_ENDPOINTS = ["/v1/embeddings", *_SCORE_ENDPOINTS]

# Qwen3-Reranker ships as a causal LM; vLLM's docs (supported_models.md, qwen3_reranker example) load it
# as a sequence classifier scoring the "yes" token against "no".
_QWEN3_RERANKER_OVERRIDES = (
    '{"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"], '
    '"is_original_qwen3_reranker": true}'
)

_DOC_TOOLS = "vLLM docs/features/tool_calling.md"
_DOC_REASONING = "vLLM docs/features/reasoning_outputs.md"
_DEEPSEEK_TOOLS = "<｜tool▁calls▁begin｜>"
_THINK_PROMPT = re.compile(r"add_generation_prompt[\s\S]{0,400}?<think>")


def _r1_style(template: str) -> bool:
    """A DeepSeek-R1 (or distill, or QwQ) template: the generation prompt opens <think>, or the first R1
    release's template, which drops the reasoning before </think> from past assistant turns."""
    if _THINK_PROMPT.search(template):
        return True
    return "<｜Assistant｜>" in template and "split('</think>')" in template and "thinking" not in template


def _v31_thinking(template: str) -> bool:
    """A DeepSeek V3.1 template: tool markers and a ``thinking`` switch that opens or closes </think>."""
    return _DEEPSEEK_TOOLS in template and "thinking" in template and "</think>" in template


def _template_text(tokenizer_config: Mapping[str, Any] | None) -> str:
    """The chat template(s) as one text: a string, or every ``template`` of a named list."""
    if not tokenizer_config:
        return ""
    template = tokenizer_config.get("chat_template")
    if isinstance(template, str):
        return template
    if isinstance(template, list):
        return "\n".join(str(item.get("template", "")) for item in template if isinstance(item, Mapping))
    return ""


def _model_type(config: Mapping[str, Any]) -> str:
    text_config = config.get("text_config")
    if not config.get("model_type") and isinstance(text_config, Mapping):
        return str(text_config.get("model_type", ""))
    return str(config.get("model_type", ""))


def _architectures(config: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in config.get("architectures") or []]


def _has(table: Mapping[str, tuple[Version, Version | None]], name: str, version: Version) -> bool:
    span = table.get(name)
    return span is not None and span[0] <= version and (span[1] is None or version < span[1])


def _names_in(table: Mapping[str, tuple[Version, Version | None]], version: Version) -> list[str]:
    return sorted(name for name in table if _has(table, name, version))


def _version_text(version: Version) -> str:
    return ".".join(str(part) for part in version)


# --- task -----------------------------------------------------------------------------------------


def _detect_task(config: Mapping[str, Any]) -> tuple[str, str]:
    archs = _architectures(config)
    if any(a.endswith("ForSequenceClassification") for a in archs):
        return "score", f"{archs[0]} is a cross-encoder (vLLM pooling_models.md: *ForSequenceClassification)"
    if isinstance(config.get("sentence_transformers"), Mapping):
        return "score", "config.json carries a sentence-transformers CrossEncoder head"
    if archs and all(a.endswith("Model") for a in archs):
        return "embed", f"{archs[0]} has no LM head: an embedding model (vLLM pooling_models.md: *Model)"
    return "generate", f"{archs[0] if archs else 'no architecture'}: a text generation model"


def _task(config: Mapping[str, Any], settings: Mapping[str, Any], served_name: str) -> tuple[str, str]:
    task = settings.get("task")
    if task is None:
        detected, why = _detect_task(config)
        hint = served_name.lower()
        if detected == "generate" and ("embed" in hint or "rerank" in hint):
            why += (
                f"; the name {served_name!r} suggests a pooling model, which config.json cannot tell: "
                "set task: embed or task: score"
            )
        return detected, why
    if task not in TASKS:
        raise ServingError(
            f"vllm_server_models[{served_name}].task must be one of {', '.join(TASKS)}, got {task!r}"
        )
    return str(task), "set by vllm_server_models[].task"


def _pooling_args(task: str, config: Mapping[str, Any], version: Version) -> tuple[list[str], str]:
    generative = any(a.endswith(("ForCausalLM", "ForConditionalGeneration")) for a in _architectures(config))
    args: list[str] = []
    why: list[str] = []
    if task == "score" and generative and _model_type(config) == "qwen3":
        args += ["--hf-overrides", _QWEN3_RERANKER_OVERRIDES]
        why.append("a Qwen3 causal LM as reranker loads as Qwen3ForSequenceClassification (yes/no tokens)")
        generative = False
    if version < RUNNER_SINCE:
        return [*args, "--task", task], "; ".join([*why, f"vLLM {_version_text(version)} takes --task"])
    args += ["--runner", "pooling"]
    if generative:  # a causal LM is adapted to pooling; a native pooling model needs no conversion
        args += ["--convert", "embed" if task == "embed" else "classify"]
        why.append("a causal LM is converted for pooling")
    return args, "; ".join([*why, "--runner pooling (vLLM >= 0.10.1)"])


# --- detection ------------------------------------------------------------------------------------


def _detect_tool_parser(
    config: Mapping[str, Any], template: str, settings: Mapping[str, Any]
) -> tuple[str | None, str]:
    """The tool-call parser the model's family and template call for, and why (None: no parser)."""
    family = _model_type(config)
    if family == "gpt_oss":
        return "openai", f"gpt-oss speaks harmony: {_DOC_TOOLS} 'OpenAI OSS Models (openai)'"
    if _DEEPSEEK_TOOLS in template:
        if _v31_thinking(template):  # its thinking prompt opens <think> too: checked before the R1 style
            return "deepseek_v31", f"DeepSeek V3.1 tool-call markers: {_DOC_TOOLS} 'DeepSeek-V3.1 Models'"
        if _r1_style(template):
            return None, (
                f"DeepSeek-R1 style template: {_DOC_REASONING} marks tool calling unsupported for the R1 "
                "series; R1-0528 works with tool_call_parser: deepseek_v3 and "
                "chat_template: examples/tool_chat_template_deepseekr1.jinja"
            )
        if "```json" in template:
            return "deepseek_v3", f"DeepSeek V3 tool-call markers: {_DOC_TOOLS} 'DeepSeek-V3 Models'"
        return "deepseek_v31", f"DeepSeek V3.1 tool-call markers: {_DOC_TOOLS} 'DeepSeek-V3.1 Models'"
    if "<arg_key>" in template:
        return "glm45", f"GLM-4.5 <arg_key> tool calls: {_DOC_TOOLS} 'GLM-4.5 Models (glm45)'"
    if "<function=" in template and "<tool_call>" in template:
        return "qwen3_coder", f"Qwen3-Coder XML tool calls (<function=...>): {_DOC_TOOLS} 'Qwen3-Coder'"
    if "<tool_call>" in template:
        return "hermes", f"Hermes-style <tool_call> in the template: {_DOC_TOOLS} 'Hermes', 'Qwen Models'"
    if "[TOOL_CALLS]" in template:
        return "mistral", f"[TOOL_CALLS] in the chat template: {_DOC_TOOLS} 'Mistral Models (mistral)'"
    if family == "llama4":
        chat_template = str(settings.get("chat_template") or "")
        if "pythonic" in chat_template:
            return "llama4_pythonic", f"Llama 4 with a pythonic template: {_DOC_TOOLS} 'Llama Models'"
        return "llama4_json", (
            f"Llama 4's own template asks for JSON tool calls; {_DOC_TOOLS} recommends llama4_pythonic "
            "with chat_template: examples/tool_chat_template_llama4_pythonic.jinja"
        )
    if "<|python_tag|>" in template or "Environment: ipython" in template:
        return "llama3_json", (
            f"Llama 3.1+ JSON tool calling in the template: {_DOC_TOOLS} 'Llama Models (llama3_json)'"
        )
    if "<|tool|>" in template and family == "phi3":
        return "phi4_mini_json", "Phi-4-mini <|tool|> tools block: vLLM phi4mini_tool_parser (phi4_mini_json)"
    if "<|tool_call|>" in template:
        return "granite", f"Granite <|tool_call|>: {_DOC_TOOLS} 'IBM Granite'"
    by_family = {"internlm2": "internlm", "kimi_k2": "kimi_k2", "jamba": "jamba"}
    if family in by_family:
        return by_family[family], f"{family} family: {_DOC_TOOLS}"
    if family.startswith("gemma"):
        return None, f"{family}: vLLM has no tool-call parser for Gemma 2/3 ({_DOC_TOOLS} lists none)"
    if not template:
        return None, "no chat template to read tool-call markers from"
    return None, "the chat template has no tool-call markers vLLM has a parser for"


def _detect_reasoning_parser(config: Mapping[str, Any], template: str) -> tuple[str | None, str]:
    family = _model_type(config)
    if family == "gpt_oss":
        return "openai_gptoss", "gpt-oss harmony analysis channel: vLLM gptoss_reasoning_parser"
    if family in ("qwen3", "qwen3_moe") and "enable_thinking" in template:
        return "qwen3", f"Qwen3 thinking template (enable_thinking): {_DOC_REASONING} 'Qwen3 series'"
    if family == "glm4_moe" and "<think>" in template:
        return "glm45", f"GLM-4.5 <think> template: {_DOC_REASONING} 'GLM-4.5 series'"
    if _v31_thinking(template):
        return "deepseek_v3", f"DeepSeek V3.1 thinking switch: {_DOC_REASONING} 'DeepSeek-V3.1'"
    if "enable_thinking" in template and "<think>" in template:
        # a hybrid template that thinks unless told not to: vLLM's qwen3 parser follows the request's
        # enable_thinking, where deepseek_r1 would take every answer of a non-thinking turn for reasoning
        return "qwen3", (
            f"hybrid thinking template (<think> switched by enable_thinking), as Qwen3's: {_DOC_REASONING} "
            "'Qwen3 series'"
        )
    if _r1_style(template):
        return "deepseek_r1", (
            f"DeepSeek-R1 style template (<think> prompt or </think> split): {_DOC_REASONING} "
            "'DeepSeek R1 series', 'QwQ-32B'"
        )
    if family == "granite" and "thinking" in template:
        return "granite", f"Granite 3.2 thinking switch: {_DOC_REASONING} 'IBM Granite 3.2'"
    return None, "no thinking markers in the chat template"


# --- choice against settings and release ----------------------------------------------------------


def _choose(
    kind: str,
    table: Mapping[str, tuple[Version, Version | None]],
    detected: tuple[str | None, str],
    setting: Any,
    version: Version,
    served_name: str,
) -> tuple[str | None, str]:
    """The parser to use: the inventory's (checked against the release) or the detected one."""
    if setting is False:
        return None, f"off: vllm_server_models[].{kind} is false"
    if setting is not None:
        name = str(setting)
        if not _has(table, name, version):
            raise ServingError(
                f"vllm_server_models[{served_name}].{kind}: vLLM {_version_text(version)} has no {name!r}; "
                f"it has: {', '.join(_names_in(table, version))}"
            )
        return name, f"set by vllm_server_models[].{kind}"
    name, why = detected
    if name == "openai_gptoss" and _has(table, "GptOss", version):
        name = "GptOss"  # the name 0.10.1 registered it under
    if name is not None and not _has(table, name, version):
        return None, f"{why}; dropped: vLLM {_version_text(version)} has no {name!r} (pin a newer release)"
    return name, why


def _version(vllm_version: str, served_name: str) -> Version:
    try:
        version = parse_version(vllm_version)
    except PlanInputError as exc:
        raise ServingError(str(exc)) from None
    if version < MIN_VERSION:
        raise ServingError(
            f"vllm_server_vllm_version {vllm_version!r} (model {served_name}): vLLM releases before "
            f"{_version_text(MIN_VERSION)} are not supported for tool calling, reasoning and pooling flags; "
            "pin vllm_server_vllm_version and vllm_server_image to 0.8.0 or newer"
        )
    return version


def _speculative(
    settings: Mapping[str, Any], vllm_version: str, served_name: str, task: str
) -> dict[str, Any] | None:
    """The model's --speculative-config (speculative.py), checked against the release and its set TP."""
    spec = settings.get("speculative")
    if spec in (None, False, {}):
        return None
    if task != "generate":
        raise ServingError(f"vllm_server_models[{served_name}].speculative: a pooling model does not decode")
    overrides = settings.get("overrides") if isinstance(settings.get("overrides"), Mapping) else {}
    tp = overrides.get("tensor_parallel_size")
    return speculative_config(spec, vllm_version, served_name, tp if isinstance(tp, int) else None)


def model_features(
    config: Mapping[str, Any],
    tokenizer_config: Mapping[str, Any] | None,
    settings: Mapping[str, Any] | None,
    vllm_version: str,
    served_name: str = "?",
) -> dict[str, Any]:
    """The task, parsers, chat template, ``vllm serve`` flags and OpenAI endpoints of one model.

    ``config``: the model's config.json; ``tokenizer_config``: its tokenizer_config.json (a separate
    chat_template.jinja goes in as its ``chat_template``); ``settings``: the ``vllm_server_models[]`` entry
    (``task``, ``tool_call_parser``, ``reasoning_parser``: a name or false, ``chat_template``: a path,
    ``speculative``: speculative.py, ``sleep``: sleep.py).
    Raises ServingError for a release before 0.8.0, an unknown task, or a parser the release lacks.
    """
    settings = settings or {}
    version = _version(vllm_version, served_name)
    template = _template_text(tokenizer_config)
    task, task_why = _task(config, settings, served_name)
    reasons: dict[str, str] = {"task": task_why}
    chat_template = settings.get("chat_template") or None
    args: list[str] = []
    plan_options: dict[str, str] = {}
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    if task == "generate":
        tool_parser, reasons["tool_call_parser"] = _choose(
            "tool_call_parser",
            TOOL_PARSERS,
            _detect_tool_parser(config, template, settings),
            settings.get("tool_call_parser"),
            version,
            served_name,
        )
        reasoning_parser, reasons["reasoning_parser"] = _choose(
            "reasoning_parser",
            REASONING_PARSERS,
            _detect_reasoning_parser(config, template),
            settings.get("reasoning_parser"),
            version,
            served_name,
        )
        if tool_parser:
            args += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
        if reasoning_parser:
            if version < ENABLE_REASONING_UNTIL:
                args.append("--enable-reasoning")
            args += ["--reasoning-parser", reasoning_parser]
        endpoints = list(_GENERATE_ENDPOINTS)
    else:
        pooling, reasons["runner"] = _pooling_args(task, config, version)
        args += pooling
        # the planner sizes it as vLLM's pooling runner starts it (fleet_planner/pooling.py)
        convert = pooling[pooling.index("--convert") + 1] if "--convert" in pooling else "none"
        plan_options = {"runner": "pooling", "convert": convert}
        endpoints = list(_EMBED_ENDPOINTS if task == "embed" else _SCORE_ENDPOINTS)
    spec = _speculative(settings, vllm_version, served_name, task)
    if spec is not None:
        args += ["--speculative-config", json.dumps(spec, sort_keys=True, separators=(",", ":"))]
        plan_options["speculative"] = spec  # the planner counts the draft's weights and KV cache
        reasons["speculative"] = f"set by vllm_server_models[].speculative (method {spec['method']})"
    sleep = sleep_launch(settings.get("sleep"), vllm_version, f"vllm_server_models[{served_name}].sleep")
    if sleep:
        args += sleep["args"]
        reasons["sleep"] = (
            f"sleep level {sleep['level']} allowed: --enable-sleep-mode, and VLLM_SERVER_DEV_MODE=1 for the "
            "/sleep and /wake_up endpoints (sleep.py)"
        )
    if chat_template:
        args += ["--chat-template", str(chat_template)]
        reasons["chat_template"] = "set by vllm_server_models[].chat_template"
    else:
        reasons["chat_template"] = "the model's own (tokenizer_config.json / chat_template.jinja)"
    return {
        "task": task,
        "tool_call_parser": tool_parser,
        "reasoning_parser": reasoning_parser,
        "chat_template": str(chat_template) if chat_template else None,
        "args": args,
        "endpoints": endpoints,
        "reasons": reasons,
        "plan_options": plan_options,
        # environment the flags need (sleep mode's dev-mode endpoints)
        "env": dict(sleep.get("env") or {}),
        "sleep_level": sleep.get("level"),
    }


# --- release help ---------------------------------------------------------------------------------

_PARSER_CHOICES = re.compile(r"^\s*--tool-call-parser \{([^}]*)\}", re.MULTILINE)


def parser_choices(help_text: str) -> frozenset[str]:
    """The ``--tool-call-parser {a,b,...}`` choices of a ``vllm serve --help=all`` text (empty if none)."""
    match = _PARSER_CHOICES.search(help_text)
    if not match:
        return frozenset()
    return frozenset(name.strip() for name in match.group(1).split(",") if name.strip())


def parser_table_drift(help_text: str, version: str) -> list[str]:
    """One line per tool-call parser TOOL_PARSERS claims for ``version`` that its help does not offer."""
    release = parse_version(version)
    offered = parser_choices(help_text)
    return [
        f"vLLM {version} `vllm serve --tool-call-parser` has no {name} (model_features.TOOL_PARSERS claims "
        f"it since {_version_text(TOOL_PARSERS[name][0])}): fix the table's release for {name}"
        for name in _names_in(TOOL_PARSERS, release)
        if name not in offered
    ]
