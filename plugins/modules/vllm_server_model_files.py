#!/usr/bin/python
# Copyright: vllm-fleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read, in one pass on the host, every file the serve stage plans a host's models from."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_server_model_files
short_description: Read the files a host's models and LoRA adapters are planned from
description:
  - One read-only pass over the model folders of a host, in the model_weights layout
    (C(<root>/<org>/<name>/<revision>), C(<root>/<org>/<name>/refs/<branch or tag>)).
  - A model or adapter whose revision is a branch or tag is pointed at the commit its refs file names,
    so the container always mounts an immutable revision.
  - Per model it returns C(config.json), C(tokenizer_config.json) with C(chat_template.jinja),
    C(model.safetensors.index.json), the bytes of its weight files and the C(config.json) of its draft model
    or EAGLE head; per adapter its C(adapter_config.json). A file that cannot be read or parsed is named with
    the reason in C(errors), never a failure of the module itself, so the role can say which input to fix.
  - Never changes anything; runs in check mode.
options:
  models:
    description:
      - The host's C(vllm_server_models) (C(name), C(path), optional C(revision) and C(speculative.model)).
    type: list
    elements: dict
    required: true
  adapters:
    description:
      - The adapters of those models as P(vllm_fleet.vllm_fleet.vllm_serving_adapters#filter) lists them
        (C(model), C(name), C(path), C(ref)).
    type: list
    elements: dict
    default: []
author: vllm-fleet maintainers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Read the model files
  vllm_fleet.vllm_fleet.vllm_server_model_files:
    models: "{{ vllm_server_models }}"
    adapters: "{{ vllm_server_models | vllm_fleet.vllm_fleet.vllm_serving_adapters('/srv/models') }}"
  register: __files
"""

RETURN = r"""
models:
  description:
    - One entry per model, in order, with C(path) (the immutable revision's folder), C(revision) and
      C(requested_revision) where a branch or tag was resolved, C(config), C(tokenizer_config) (with
      C(chat_template) from C(chat_template.jinja) when the folder has one), C(index), C(weights_bytes),
      C(draft_config) and C(errors) (file -> why it could not be read).
  returned: always
  type: list
  elements: dict
adapters:
  description:
    - The adapters, each with C(path) resolved, C(resolved_revision), C(config) (the text) and C(errors).
  returned: always
  type: list
  elements: dict
"""

import json
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def read_text(path: str) -> tuple[str | None, str | None]:
    """The file's text, or None and why not."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path}: {getattr(exc, 'strerror', None) or exc}"


def read_json(path: str, errors: dict[str, str], name: str, required: bool = True) -> Any:
    """The file parsed as JSON; a missing optional file is no error, an unparsable one always is."""
    text, why = read_text(path)
    if text is None:
        if required or os.path.exists(path):
            errors[name] = str(why)
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        errors[name] = f"{path} is not JSON: {exc}"
        return None


def resolved_commit(ref_file: str) -> str:
    """The commit a branch or tag's refs file names ("" when there is none or it is not a commit name)."""
    text, _why = read_text(ref_file)
    commit = (text or "").strip()
    return commit if commit and "/" not in commit else ""


def weights_bytes(path: str) -> int:
    """The bytes of the weight files at the top of a model folder, through symlinks."""
    total = 0
    try:
        names = os.listdir(path)
    except OSError:
        return 0
    for name in names:
        if name.endswith(WEIGHT_SUFFIXES):
            try:
                total += os.stat(os.path.join(path, name)).st_size
            except OSError:
                continue
    return total


def model_files(model: dict[str, Any]) -> dict[str, Any]:
    declared = str(model.get("path") or "")
    base, leaf = os.path.dirname(declared), os.path.basename(declared)
    out: dict[str, Any] = {"name": model.get("name"), "path": declared, "errors": {}}
    commit = resolved_commit(os.path.join(base, "refs", leaf))
    if commit:
        out.update(
            path=os.path.join(base, commit),
            revision=commit,
            requested_revision=str(model.get("revision") or leaf),
        )
    path, errors = out["path"], out["errors"]
    out["config"] = read_json(os.path.join(path, "config.json"), errors, "config.json")
    tokenizer = read_json(os.path.join(path, "tokenizer_config.json"), errors, "tokenizer_config.json", False)
    template, _why = read_text(os.path.join(path, "chat_template.jinja"))
    tokenizer = tokenizer if isinstance(tokenizer, dict) else {}
    if template is not None:
        tokenizer["chat_template"] = template
    out["tokenizer_config"] = tokenizer
    out["index"] = read_json(os.path.join(path, "model.safetensors.index.json"), errors, "index", False)
    out["weights_bytes"] = weights_bytes(path)
    draft = (
        (model.get("speculative") or {}).get("model") if isinstance(model.get("speculative"), dict) else None
    )
    out["draft_config"] = (
        read_json(os.path.join(str(draft), "config.json"), errors, "speculative.model") if draft else None
    )
    return out


def adapter_files(adapter: dict[str, Any]) -> dict[str, Any]:
    out = dict(adapter)
    commit = resolved_commit(str(adapter["ref"])) if adapter.get("ref") else ""
    if commit:
        out.update(path=str(adapter["path"]).rsplit("/", 1)[0] + "/" + commit, resolved_revision=commit)
    out["config"], why = read_text(os.path.join(str(out["path"]), "adapter_config.json"))
    out["errors"] = {"adapter_config.json": why} if why else {}
    return out


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "models": {"type": "list", "elements": "dict", "required": True},
            "adapters": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    module.exit_json(
        changed=False,
        models=[model_files(m) for m in module.params["models"]],
        adapters=[adapter_files(a) for a in module.params["adapters"]],
    )


if __name__ == "__main__":
    main()
