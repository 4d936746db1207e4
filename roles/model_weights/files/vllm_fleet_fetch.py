#!/usr/bin/env python3
"""Fetch the declared models onto shared storage once, verified, resumable.

  vllm_fleet_fetch.py fetch --spec SPEC.json [--check]   # writer host (in the venv with the hub clients)
  vllm_fleet_fetch.py wait  --spec SPEC.json [--timeout S] # readers: wait for verified copies (stdlib only)

Per model: metadata first (revision -> immutable id, file list with sizes and sha256), a quick check of
an existing verified copy (manifest), then under a writer lock on the shared storage: metadata files,
disk-space check, download with the official client into a staging folder (finished files are not
fetched again), verification of every file (re-fetching mismatches), manifest, atomic rename to
ROOT/ORG/NAME/REVISION. Tokens come from the environment (VLLM_FLEET_HF_TOKEN,
VLLM_FLEET_MODELSCOPE_TOKEN), never from the spec or the command line.

Prints one JSON document on stdout: {"changed": bool, "models": {...}, "failed": {...}}; exit 1 on failure.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Protocol

# run as a script: its own folder (where vllm_fleet_weights.py is installed beside it) is on the path
from vllm_fleet_weights import (
    COMMIT_RE,
    LOCK_NAME,
    Plan,
    RemoteFile,
    WeightsError,
    WriterLock,
    build_manifest,
    check_disk_space,
    check_present,
    check_repo_id,
    final_dir,
    hash_file,
    listing_digest,
    missing_bytes,
    model_dir,
    read_manifest,
    read_ref,
    select_files,
    staging_dir,
    verify_tree,
    write_manifest,
    write_ref,
)

TOKEN_ENV = {"huggingface": "VLLM_FLEET_HF_TOKEN", "modelscope": "VLLM_FLEET_MODELSCOPE_TOKEN"}
DEFAULT_ENDPOINT = {"huggingface": "https://huggingface.co", "modelscope": "https://modelscope.cn"}
log = logging.getLogger("vllm-fleet-fetch")


def glob_escape(path: str) -> str:
    """An fnmatch pattern matching exactly PATH."""
    return "".join(f"[{c}]" if c in "[]*?" else c for c in path)


class Source(Protocol):
    endpoint: str

    def plan(self, model: dict[str, Any]) -> Plan: ...

    def download(self, plan: Plan, staging: Path, paths: list[str], force: bool) -> None: ...


class HuggingFaceSource:
    """huggingface_hub: model_info(files_metadata=True) for metadata, snapshot_download into staging."""

    def __init__(self, endpoint: str | None, token: str | None, workers: int) -> None:
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT["huggingface"]).rstrip(
            "/"
        )
        self.token = token or None
        self.workers = workers

    def _map_error(self, err: Exception, model: dict[str, Any], revision: str) -> WeightsError:
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        repo = model["repo_id"]
        if isinstance(err, RevisionNotFoundError):
            return WeightsError(
                "unknown_revision",
                f"Revision {revision!r} does not exist in {repo} on {self.endpoint}.",
                f"Set revision of model {model['name']!r} in "
                "model_weights_models to an existing commit, tag or branch.",
            )
        if isinstance(err, GatedRepoError):
            if self.token:
                return WeightsError(
                    "gated_denied",
                    f"{repo} is gated and the token in model_weights_hf_token has not been granted access.",
                    f"Accept the licence of {repo} on the hub "
                    "with the account of that token (or use a token that has access).",
                )
            return _gated_no_token(repo)
        if isinstance(err, RepositoryNotFoundError):
            return WeightsError(
                "repo_not_found",
                f"Repository {repo} was not found on {self.endpoint} (or is "
                "private and the token cannot see it).",
                "Check repo_id and endpoint of model "
                f"{model['name']!r}; for a private repository set model_weights_hf_token.",
            )
        if isinstance(err, HfHubHTTPError):
            return WeightsError(
                "hub_error",
                f"{self.endpoint} answered {err}.",
                "Retry later, or set endpoint of the model to a reachable mirror.",
            )
        return WeightsError(
            "hub_unreachable",
            f"Cannot reach {self.endpoint}: {err}.",
            "Check the writer host's network/proxy, or set endpoint to a mirror.",
        )

    def plan(self, model: dict[str, Any]) -> Plan:
        import httpx2
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError

        revision = str(model.get("revision") or "main")
        api = HfApi(endpoint=self.endpoint, token=self.token or False)
        try:
            info = api.model_info(model["repo_id"], revision=revision, files_metadata=True)
        except (HfHubHTTPError, httpx2.HTTPError) as err:
            raise self._map_error(err, model, revision) from None
        gated = bool(info.gated)
        if gated and not self.token:
            raise _gated_no_token(model["repo_id"])
        files = [
            RemoteFile(s.rfilename, int(s.size or 0), s.lfs.sha256 if s.lfs else None, s.blob_id)
            for s in info.siblings or []
        ]
        kept, skipped = select_files(
            files, model.get("allow_patterns"), model.get("ignore_patterns"), model["repo_id"]
        )
        return Plan(
            model["name"],
            "huggingface",
            model["repo_id"],
            revision,
            str(info.sha),
            "commit",
            kept,
            gated,
            skipped,
        )

    def download(self, plan: Plan, staging: Path, paths: list[str], force: bool) -> None:
        import httpx2
        from huggingface_hub import hf_hub_download, snapshot_download
        from huggingface_hub.errors import HfHubHTTPError

        model = {"name": plan.name, "repo_id": plan.repo_id}
        try:
            if force:
                for path in paths:
                    (staging / path).unlink(missing_ok=True)
                    (staging / ".cache" / "huggingface" / "download" / f"{path}.metadata").unlink(
                        missing_ok=True
                    )
                    hf_hub_download(
                        plan.repo_id,
                        path,
                        revision=plan.revision,
                        local_dir=staging,
                        endpoint=self.endpoint,
                        token=self.token or False,
                        force_download=True,
                    )
            else:
                snapshot_download(
                    plan.repo_id,
                    revision=plan.revision,
                    local_dir=staging,
                    allow_patterns=[glob_escape(p) for p in paths],
                    endpoint=self.endpoint,
                    token=self.token or False,
                    max_workers=self.workers,
                )
        except (HfHubHTTPError, httpx2.HTTPError) as err:
            raise self._map_error(err, model, plan.revision) from None


class ModelScopeSource:
    """modelscope: modelscope_hub's HubApi for revisions and the file list (with sha256),
    modelscope.snapshot_download into staging."""

    def __init__(self, endpoint: str | None, token: str | None, workers: int) -> None:
        self.endpoint = (
            endpoint or os.environ.get("MODELSCOPE_ENDPOINT") or DEFAULT_ENDPOINT["modelscope"]
        ).rstrip("/")
        self.token = token or None
        self.workers = workers

    def plan(self, model: dict[str, Any]) -> Plan:
        from modelscope_hub import HubApi
        from modelscope_hub.errors import APIError, AuthenticationError, NotExistError, PermissionDeniedError

        repo = model["repo_id"]
        revision = str(model.get("revision") or "master")
        api = HubApi(endpoint=self.endpoint, token=self.token)
        try:
            if not COMMIT_RE.match(revision):
                branches, tags = api.legacy.list_revisions_detail(repo, "model")
                names = {b.get("Revision") for b in branches} | {t.get("Revision") for t in tags}
                if revision not in names:
                    raise WeightsError(
                        "unknown_revision",
                        f"Revision {revision!r} does not exist in {repo} on "
                        f"{self.endpoint} (branches and tags: {', '.join(sorted(n for n in names if n))}).",
                        f"Set revision of model {model['name']!r} in model_weights_models to an "
                        "existing tag, branch or commit.",
                    )
            infos = api.list_repo_files(repo, "model", revision=revision, recursive=True)
        except (AuthenticationError, PermissionDeniedError):
            if self.token:
                raise WeightsError(
                    "gated_denied",
                    f"{repo} refused the token in model_weights_modelscope_token.",
                    f"Request access to {repo} with the account of that token.",
                ) from None
            raise _gated_no_token(repo, "model_weights_modelscope_token") from None
        except NotExistError:
            if COMMIT_RE.match(revision):
                raise WeightsError(
                    "unknown_revision",
                    f"Revision {revision!r} does not exist in {repo} on {self.endpoint}.",
                    f"Set revision of model {model['name']!r} to an existing commit, tag or branch.",
                ) from None
            raise WeightsError(
                "repo_not_found",
                f"Repository {repo} was not found on {self.endpoint}.",
                f"Check repo_id and endpoint of model {model['name']!r}.",
            ) from None
        except APIError as err:
            raise WeightsError(
                "hub_error",
                f"{self.endpoint} answered {err}.",
                "Retry later, or set endpoint of the model to a reachable mirror.",
            ) from None
        files = [RemoteFile(f.path, int(f.size), f.sha256 or None, None) for f in infos if not f.is_dir]
        kept, skipped = select_files(files, model.get("allow_patterns"), model.get("ignore_patterns"), repo)
        if COMMIT_RE.match(revision):
            resolved, kind = revision, "commit"
        else:
            resolved, kind = listing_digest(kept), "listing-digest"
        return Plan(model["name"], "modelscope", repo, revision, resolved, kind, kept, False, skipped)

    def download(self, plan: Plan, staging: Path, paths: list[str], force: bool) -> None:
        from modelscope import snapshot_download
        from modelscope_hub.errors import APIError

        if force:
            for path in paths:
                (staging / path).unlink(missing_ok=True)
        revision = plan.revision if plan.revision_kind == "commit" else plan.requested_revision
        try:
            snapshot_download(
                model_id=plan.repo_id,
                revision=revision,
                local_dir=str(staging),
                allow_patterns=[glob_escape(p) for p in paths],
                endpoint=self.endpoint,
                token=self.token,
                max_workers=self.workers,
            )
        except (APIError, OSError) as err:
            raise WeightsError(
                "hub_error",
                f"Download of {plan.repo_id} from {self.endpoint} failed: {err}.",
                "Re-run the play: finished files are kept and not fetched again.",
            ) from None


class LocalSource:
    """A folder on the writer host (e.g. weights copied in by hand): hashed, copied and verified."""

    endpoint = "local"

    def plan(self, model: dict[str, Any]) -> Plan:
        folder = Path(str(model.get("path") or ""))
        if not folder.is_dir():
            raise WeightsError(
                "local_path_missing",
                f"Local model folder {folder} does not exist on the writer host.",
                f"Set path of model {model['name']!r} to a folder on the writer host.",
            )
        files = []
        for item in sorted(folder.rglob("*")):
            rel = item.relative_to(folder)
            if item.is_file() and not any(part.startswith(".") for part in rel.parts):
                files.append(RemoteFile(rel.as_posix(), item.stat().st_size, hash_file(item)[0], None))
        kept, skipped = select_files(
            files, model.get("allow_patterns"), model.get("ignore_patterns"), str(folder)
        )
        repo = model.get("repo_id") or f"local/{model['name']}"
        return Plan(
            model["name"],
            "local",
            repo,
            "local",
            listing_digest(kept),
            "listing-digest",
            kept,
            False,
            skipped,
        )

    def __init__(self, folder_of: dict[str, str]) -> None:
        self.folder_of = folder_of

    def download(self, plan: Plan, staging: Path, paths: list[str], force: bool) -> None:
        folder = Path(self.folder_of[plan.name])
        for path in paths:
            dest = staging / path
            if not force and dest.is_file() and dest.stat().st_size == (folder / path).stat().st_size:
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".partial")
            shutil.copyfile(folder / path, tmp)
            os.replace(tmp, dest)


def _gated_no_token(repo: str, var: str = "model_weights_hf_token") -> WeightsError:
    return WeightsError(
        "gated_no_token",
        f"{repo} is a gated repository and no token is configured.",
        f"Accept its licence on the hub, then put a read token in {var} (Ansible Vault).",
    )


def load_tokens(path: str | None) -> None:
    """Tokens from a root-only JSON file {"huggingface": "...", "modelscope": "..."} into the environment."""
    if not path:
        return
    data = json.loads(Path(path).read_text() or "{}")
    for source, var in TOKEN_ENV.items():
        if data.get(source):
            os.environ[var] = str(data[source])


def make_source(model: dict[str, Any], spec: dict[str, Any]) -> Source:
    kind = model.get("source", "huggingface")
    workers = int(spec.get("download_workers", 8))
    if kind == "huggingface":
        return HuggingFaceSource(
            model.get("endpoint") or spec.get("hf_endpoint"),
            os.environ.get(TOKEN_ENV["huggingface"]),
            workers,
        )
    if kind == "modelscope":
        return ModelScopeSource(
            model.get("endpoint") or spec.get("modelscope_endpoint"),
            os.environ.get(TOKEN_ENV["modelscope"]),
            workers,
        )
    if kind == "local":
        return LocalSource({model["name"]: str(model.get("path"))})
    raise WeightsError(
        "bad_source",
        f"Model {model.get('name')!r} has source {kind!r}.",
        "Set source to huggingface, modelscope or local.",
    )


def _result(plan: Plan, root: Path, status: str, **extra: Any) -> dict[str, Any]:
    path = final_dir(root, plan.repo_id, plan.revision)
    out = {
        "status": status,
        "path": str(path),
        "repo_id": plan.repo_id,
        "source": plan.source,
        "revision": plan.revision,
        "requested_revision": plan.requested_revision,
        "revision_kind": plan.revision_kind,
        "total_bytes": plan.total_bytes,
        "files": len(plan.files),
    }
    config = path / "config.json" if path.is_dir() else None
    if config is not None and config.is_file():
        try:
            out["config"] = json.loads(config.read_text())
        except json.JSONDecodeError:
            pass
    out.update(extra)
    return out


def clean_stale_partials(staging: Path) -> int:
    """Remove the client's per-process temporary files left by a killed download (never reusable)."""
    removed = 0
    download_meta = staging / ".cache" / "huggingface" / "download"
    if download_meta.is_dir():
        for item in download_meta.rglob("*.incomplete"):
            item.unlink(missing_ok=True)
            removed += 1
    return removed


def fetch_model(model: dict[str, Any], spec: dict[str, Any], check: bool) -> tuple[bool, dict[str, Any]]:
    root = Path(spec["root"])
    source = make_source(model, spec)
    plan = source.plan(model)
    target = final_dir(root, plan.repo_id, plan.revision)
    full = bool(spec.get("verify_existing_full", False))
    if check_present(target, plan, full=full) is None:
        changed = False if check else write_ref(root, plan.repo_id, plan.requested_revision, plan.revision)
        return changed, _result(
            plan, root, "present", fetched_files=0, verify_seconds=0.0, waited_seconds=0.0
        )
    if check:
        return True, _result(plan, root, "would_fetch", fetched_files=len(plan.files))

    mdir = model_dir(root, plan.repo_id)
    mdir.mkdir(parents=True, exist_ok=True)
    lock = WriterLock(
        mdir / LOCK_NAME,
        stale_after=float(spec.get("lock_stale_seconds", 600)),
        heartbeat=float(spec.get("lock_heartbeat_seconds", 15)),
        poll=float(spec.get("lock_poll_seconds", 2)),
    )

    def waiting(owner: Any) -> None:
        log.info("waiting for %s held by %s", lock.path, owner)

    lock.acquire(timeout=float(spec.get("lock_timeout_seconds", 7200)), on_wait=waiting)
    try:
        return _fetch_locked(spec, source, plan, target, mdir, lock)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise _filled_up(staging_dir(root, plan.repo_id, plan.revision), plan, err) from None
    finally:
        lock.release()


def _fetch_locked(
    spec: dict[str, Any],
    source: Source,
    plan: Plan,
    target: Path,
    mdir: Path,
    lock: WriterLock,
) -> tuple[bool, dict[str, Any]]:
    """The writer's part, under the lock: staging, space check, download, verify, publish."""
    root = Path(spec["root"])
    if check_present(target, plan) is None:  # another writer finished while we waited
        changed = write_ref(root, plan.repo_id, plan.requested_revision, plan.revision)
        return changed, _result(
            plan,
            root,
            "present",
            fetched_files=0,
            verify_seconds=0.0,
            waited_seconds=round(lock.waited, 3),
        )
    if target.exists():  # a copy without a valid manifest: never trusted, set aside
        trash = mdir / f".trash-{plan.revision}-{int(time.time())}"
        os.replace(target, trash)
        shutil.rmtree(trash, ignore_errors=True)
    staging = staging_dir(root, plan.repo_id, plan.revision)
    staging.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(staging)
    fetched = len([f for f in plan.files if not (staging / f.path).is_file()])
    meta = [f.path for f in plan.files if f.is_metadata]
    if meta:
        source.download(plan, staging, meta, force=False)
    disk = check_disk_space(
        staging,
        missing_bytes(plan.files, staging),
        int(float(spec.get("disk_margin_bytes", 1 << 30))),
        float(spec.get("disk_margin_ratio", 0.05)),
        f"{plan.repo_id}@{plan.revision}",
    )
    lock.ensure_held()
    source.download(plan, staging, [f.path for f in plan.files], force=False)
    retries = int(spec.get("verify_retries", 2))
    verify_seconds = 0.0
    refetched: dict[str, str] = {}
    for attempt in range(retries + 1):
        started = time.monotonic()
        bad = verify_tree(staging, plan.files, workers=int(spec.get("verify_workers", 4)))
        verify_seconds += time.monotonic() - started
        if not bad:
            break
        if attempt == retries:
            raise WeightsError(
                "verify_failed",
                f"{plan.repo_id}@{plan.revision}: {len(bad)} file(s) still do "
                f"not match the hub after {retries} re-fetches: "
                + "; ".join(f"{p}: {r}" for p, r in sorted(bad.items())[:5])
                + ".",
                "Check the storage and the mirror (endpoint) for corruption, then re-run.",
            )
        log.warning("re-fetching %d file(s) that failed verification: %s", len(bad), bad)
        refetched.update(bad)
        lock.ensure_held()
        source.download(plan, staging, sorted(bad), force=True)
    shutil.rmtree(staging / ".cache", ignore_errors=True)
    write_manifest(staging, build_manifest(plan, source.endpoint))
    lock.ensure_held()
    os.replace(staging, target)
    write_ref(root, plan.repo_id, plan.requested_revision, plan.revision)
    verified = sum(f.size for f in plan.files)
    return True, _result(
        plan,
        root,
        "fetched",
        fetched_files=fetched,
        refetched=sorted(refetched),
        verify_seconds=round(verify_seconds, 3),
        verified_bytes=verified,
        waited_seconds=round(lock.waited, 3),
        disk=disk,
        skipped=plan.skipped,
    )


def _filled_up(staging: Path, plan: Plan, err: OSError) -> WeightsError:
    """The storage filled up after the space check (another writer, another job): nothing is published."""
    return WeightsError(
        "disk_full",
        f"The storage under {staging.parent} filled up while {plan.repo_id}@{plan.revision} was downloading "
        f"({err.strerror}; {_free_text(staging)} free now). Nothing was published: the revision served "
        "before is untouched.",
        "Free space on the model storage (old revisions live next to the new one; another job may have "
        f"filled it), then re-run: the files finished so far stay in {staging.name}, not fetched again.",
    )


def _free_text(path: Path) -> str:
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return "unknown"
    return f"{free / (1 << 20):.1f} MiB"


def wait_model(model: dict[str, Any], spec: dict[str, Any], deadline: float) -> dict[str, Any]:
    """Readers: wait until the writer's verified copy is visible on this host's mount."""
    root = Path(spec["root"])
    repo = model.get("repo_id") or f"local/{model['name']}"
    check_repo_id(repo)
    requested = str(model.get("revision") or ("local" if model.get("source") == "local" else "main"))
    why = "not yet resolved"
    while True:
        revision = model.get("resolved_revision") or read_ref(root, repo, requested)
        if revision:
            path = final_dir(root, repo, revision)
            why = check_present(path, None) or ""
            if not why:
                manifest = read_manifest(path) or {}
                out = {
                    "status": "present",
                    "path": str(path),
                    "repo_id": repo,
                    "revision": revision,
                    "requested_revision": requested,
                    "total_bytes": manifest.get("total_bytes"),
                    "files": len(manifest.get("files", [])),
                }
                if (path / "config.json").is_file():
                    out["config"] = json.loads((path / "config.json").read_text())
                return out
        if time.monotonic() > deadline:
            raise WeightsError(
                "wait_timeout",
                f"No verified copy of {repo}@{requested} appeared under {root} ({why}).",
                "Check that the writer host fetched it (model_weights stage on the "
                "storage host) and that model_weights_root is the mount of the shared storage "
                "on this host.",
            )
        time.sleep(float(spec.get("wait_poll_seconds", 3)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["fetch", "wait"])
    parser.add_argument("--spec", required=True, help="JSON file: {root, models: [...], ...} ('-' = stdin)")
    parser.add_argument("--check", action="store_true", help="report what would change; fetch nothing")
    parser.add_argument("--timeout", type=float, default=600.0, help="wait mode: seconds to wait")
    parser.add_argument("--tokens", help="root-only JSON file with the hub tokens")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    load_tokens(args.tokens)
    spec = json.load(sys.stdin) if args.spec == "-" else json.loads(Path(args.spec).read_text())
    results: dict[str, Any] = {}
    failed: dict[str, Any] = {}
    changed = False
    deadline = time.monotonic() + args.timeout
    for model in spec.get("models", []):
        name = str(model.get("name"))
        try:
            if args.mode == "fetch":
                model_changed, results[name] = fetch_model(model, spec, args.check)
                changed = changed or model_changed
            else:
                results[name] = wait_model(model, spec, deadline)
        except WeightsError as err:
            failed[name] = err.as_dict()
            log.error("%s: %s", name, err)
    json.dump({"changed": changed, "models": results, "failed": failed}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
