"""The vllm_server_model_files module's reading of model and adapter folders, on real files here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
_spec = importlib.util.spec_from_file_location(
    "vllm_server_model_files", ROOT / "plugins" / "modules" / "vllm_server_model_files.py"
)
files_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(files_module)

COMMIT = "c" * 40


def _model_folder(tmp_path: Path) -> Path:
    """org/model in the model_weights layout: one commit folder and a branch naming it."""
    base = tmp_path / "org" / "model"
    folder = base / COMMIT
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    (folder / "model-00001.safetensors").write_bytes(b"\0" * 1000)
    (tmp_path / "shard.safetensors").write_bytes(b"\0" * 500)
    (folder / "model-00002.safetensors").symlink_to(tmp_path / "shard.safetensors")
    (folder / "notes.txt").write_bytes(b"\0" * 7)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(COMMIT + "\n")
    return base


def test_a_branch_is_pointed_at_its_commit_and_every_planning_input_is_read(tmp_path):
    base = _model_folder(tmp_path)
    read = files_module.model_files({"name": "m", "path": str(base / "main")})
    assert (read["path"], read["revision"], read["requested_revision"]) == (
        str(base / COMMIT),
        COMMIT,
        "main",
    )
    assert read["config"] == {"architectures": ["Qwen3ForCausalLM"]}
    # the separate chat_template.jinja is the template, as transformers reads it
    assert read["tokenizer_config"] == {"eos_token": "<|im_end|>", "chat_template": "{{ messages }}"}
    # weight files only, a symlinked shard by its target's size
    assert read["weights_bytes"] == 1500
    # no index and no draft: neither is an error
    assert (read["index"], read["draft_config"], read["errors"]) == (None, None, {})


def test_what_cannot_be_read_is_named_with_the_file(tmp_path):
    base = _model_folder(tmp_path)
    (base / COMMIT / "tokenizer_config.json").write_text("{not json")
    read = files_module.model_files(
        {"name": "m", "path": str(base / COMMIT), "speculative": {"model": str(tmp_path / "no-draft")}}
    )
    assert "revision" not in read  # a commit folder is used as it is
    assert read["errors"]["tokenizer_config.json"].startswith(
        f"{base / COMMIT}/tokenizer_config.json is not JSON"
    )
    assert (
        read["errors"]["speculative.model"] == f"{tmp_path}/no-draft/config.json: No such file or directory"
    )
    missing = files_module.model_files({"name": "m", "path": str(base / "v2")})
    assert missing["errors"]["config.json"] == f"{base}/v2/config.json: No such file or directory"
    assert missing["weights_bytes"] == 0


def test_an_adapter_branch_is_resolved_and_its_config_kept_as_text(tmp_path):
    folder = tmp_path / "acme" / "task" / COMMIT
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text('{"r": 16}')
    (tmp_path / "acme" / "task" / "refs").mkdir()
    (tmp_path / "acme" / "task" / "refs" / "v1").write_text(COMMIT)
    entry = {
        "model": "m",
        "name": "task",
        "path": str(tmp_path / "acme/task/v1"),
        "ref": str(tmp_path / "acme/task/refs/v1"),
    }
    read = files_module.adapter_files(entry)
    assert (read["path"], read["resolved_revision"], read["config"], read["errors"]) == (
        str(folder),
        COMMIT,
        '{"r": 16}',
        {},
    )
    gone = files_module.adapter_files({**entry, "ref": "", "path": str(tmp_path / "acme/gone")})
    assert gone["config"] is None and "No such file" in gone["errors"]["adapter_config.json"]
