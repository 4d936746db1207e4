"""Hugging Face hub checks: which repos to probe from which host, and the verdict on token/access."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .results import FAIL, PASS, SKIP, WARN, result


def hub_requests(records: Iterable[Mapping[str, Any]], endpoint: str) -> list[dict[str, Any]]:
    """One access check per hub model stored by a writer host: the URL to HEAD and from which host."""
    out = []
    for rec in records:
        for model in rec.get("stored") or []:
            if model.get("source") not in ("huggingface", "hf"):
                continue
            base = (model.get("endpoint") or endpoint or "https://huggingface.co").rstrip("/")
            out.append(
                {
                    "name": model["name"],
                    "repo_id": model["repo_id"],
                    "revision": model["revision"],
                    "endpoint": base,
                    "host": rec["host"],
                    "url": f"{base}/{model['repo_id']}/resolve/{model['revision']}/config.json",
                }
            )
    return out


def hub_results(
    checks: Iterable[Mapping[str, Any]], offline: bool, models_declared: int
) -> list[dict[str, Any]]:
    """Results of the Hugging Face access probes (HEAD of a file with the token).

    ``checks``: ``{name, repo_id, revision, endpoint, status (HTTP code, -1 = no answer),
    token_set, host, msg}``.
    """
    checks = list(checks)
    if offline:
        return [
            result(
                "hf_access",
                "-",
                "hub",
                SKIP,
                "offline: fleet_doctor_hub_offline is true (air-gapped fleet or staged weights)",
                "",
            )
        ]
    if not checks:
        what = "no Hugging Face model in model_weights_models" if models_declared else "no model declared"
        return [result("hf_access", "-", "hub", SKIP, f"{what}: nothing to check")]
    out = []
    for c in checks:
        subject = f"{c.get('repo_id')}@{c.get('revision')}"
        host = c.get("host") or "-"
        status = int(c.get("status") if c.get("status") not in (None, "") else -1)
        token = "with the token" if c.get("token_set") else "without a token"
        url = f"{(c.get('endpoint') or 'https://huggingface.co').rstrip('/')}/{c.get('repo_id')}"
        if 200 <= status < 400:
            out.append(result("hf_access", host, subject, PASS, f"HTTP {status} {token}"))
        elif status == 401:
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    FAIL,
                    f"HTTP 401 {token}: the repo is gated or private and the token is missing or invalid",
                    "put a read token in Vault and set model_weights_hf_token "
                    "(ansible-vault encrypt_string 'hf_...' --name vault_hf_token)",
                )
            )
        elif status == 403:
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    FAIL,
                    f"HTTP 403 {token}: the token's account has not been granted access to this gated repo",
                    f"accept the model's licence at {url} with the account that owns model_weights_hf_token",
                )
            )
        elif status == 404:
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    FAIL,
                    "HTTP 404: no such repo, revision or config.json",
                    f"check repo_id and revision of model {c.get('name')} in model_weights_models",
                )
            )
        else:
            reason = f"HTTP {status}" if status > 0 else (c.get("msg") or "no answer")
            out.append(
                result(
                    "hf_access",
                    host,
                    subject,
                    WARN,
                    f"could not ask the hub from {host}: {reason}",
                    "check the proxy/firewall of the writer host, set model_weights_hf_endpoint to a "
                    "reachable "
                    "mirror, or set fleet_doctor_hub_offline: true for an air-gapped fleet",
                )
            )
    return out
