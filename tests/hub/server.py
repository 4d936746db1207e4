#!/usr/bin/env python3
"""Local stand-in for the Hugging Face Hub and ModelScope download APIs (tests and lab only).

Implements the subset of both hubs' HTTP APIs that the official clients call for a download
(`huggingface_hub.snapshot_download` / `hf_hub_download` / `HfApi.model_info(files_metadata=True)` /
`HfApi.list_repo_tree`, and `modelscope.snapshot_download` / `HubApi.list_repo_files`), serving
model folders from local disk. Point the clients at it with `HF_ENDPOINT=http://HOST:PORT` or
`MODELSCOPE_ENDPOINT=http://HOST:PORT` (or the `endpoint=` argument).

Standard library only, so it runs in any container with python3. Never a production default.

Test hooks under `/_hub/`: `GET stats` (bytes served per repository and per file),
`POST reset`, `POST throttle?bps=N`, `POST corrupt?repo=ORG/NAME&path=FILE&times=N`
(serve N corrupted copies of a file, same size), `POST add?repo=...&dir=...&branch=...`.

Usage:
  server.py serve --port 8990 --repo ORG/NAME=DIR[,gated=TOKEN1+TOKEN2][,branch=main] ...
  server.py make-model OUT_DIR [--shards 2] [--shard-bytes 1048576] [--gguf-only]
  server.py make-lora OUT_DIR --base-config MODEL/config.json [--rank 8] [--seed S]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".onnx", ".msgpack", ".h5", ".model", ".ckpt")
LFS_MIN_SIZE = 10 * 1024 * 1024
CHUNK = 256 * 1024


@dataclass(frozen=True)
class Blob:
    """One file of one commit."""

    path: str
    source: Path
    size: int
    sha256: str
    git_oid: str
    lfs: bool


@dataclass
class Repo:
    repo_id: str
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    commits: dict[str, dict[str, Blob]] = field(default_factory=dict)
    gated_tokens: set[str] | None = None  # None: not gated; empty set: nobody has access

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.branches.get(revision) or self.tags.get(revision)


def git_blob_oid(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - git object id, not security
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def scan_folder(folder: Path) -> dict[str, Blob]:
    blobs: dict[str, Blob] = {}
    for item in sorted(folder.rglob("*")):
        if not item.is_file() or ".cache" in item.relative_to(folder).parts:
            continue
        rel = item.relative_to(folder).as_posix()
        size = item.stat().st_size
        lfs = rel.endswith(LFS_SUFFIXES) or size >= LFS_MIN_SIZE
        blobs[rel] = Blob(rel, item, size, file_sha256(item), git_blob_oid(item), lfs)
    return blobs


class HubState:
    """Repositories, counters and fault injection shared by all request threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.repos: dict[str, Repo] = {}
        self.bytes_served: dict[str, int] = {}
        self.file_bytes: dict[str, dict[str, int]] = {}
        self.file_gets: dict[str, dict[str, int]] = {}
        self.requests: list[str] = []
        self.throttle_bps = 0
        self.corrupt: dict[tuple[str, str], int] = {}

    def add_repo(
        self,
        repo_id: str,
        folder: Path,
        branch: str = "main",
        gated_tokens: set[str] | None = None,
        tag: str | None = None,
    ) -> str:
        """Publish FOLDER as a new commit of REPO_ID on BRANCH; returns the commit id."""
        blobs = scan_folder(Path(folder))
        with self.lock:
            repo = self.repos.setdefault(repo_id, Repo(repo_id))
            parent = repo.branches.get(branch, "")
            listing = json.dumps([parent] + [[b.path, b.git_oid] for b in blobs.values()])
            commit = hashlib.sha1(listing.encode()).hexdigest()  # noqa: S324 - commit id
            repo.commits[commit] = blobs
            repo.branches[branch] = commit
            if tag:
                repo.tags[tag] = commit
            if gated_tokens is not None:
                repo.gated_tokens = set(gated_tokens)
            return commit

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "bytes": dict(self.bytes_served),
                "files": {k: dict(v) for k, v in self.file_bytes.items()},
                "gets": {k: dict(v) for k, v in self.file_gets.items()},
                "requests": len(self.requests),
                "repos": {
                    rid: {
                        "branches": dict(r.branches),
                        "tags": dict(r.tags),
                        "size": {c: sum(b.size for b in blobs.values()) for c, blobs in r.commits.items()},
                    }
                    for rid, r in self.repos.items()
                },
            }

    def reset(self) -> None:
        with self.lock:
            self.bytes_served.clear()
            self.file_bytes.clear()
            self.file_gets.clear()
            self.requests.clear()
            self.corrupt.clear()
            self.throttle_bps = 0

    def count(self, repo_id: str, path: str, nbytes: int) -> None:
        with self.lock:
            self.bytes_served[repo_id] = self.bytes_served.get(repo_id, 0) + nbytes
            per_file = self.file_bytes.setdefault(repo_id, {})
            per_file[path] = per_file.get(path, 0) + nbytes

    def take_corruption(self, repo_id: str, path: str) -> bool:
        with self.lock:
            left = self.corrupt.get((repo_id, path), 0)
            if left <= 0:
                return False
            self.corrupt[(repo_id, path)] = left - 1
            return True


class HubError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "vllm-fleet-test-hub/1"
    state: HubState  # set on the subclass built by make_server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        if os.environ.get("VLLM_FLEET_HUB_LOG"):
            sys.stderr.write("hub: " + format % args + "\n")

    # -- plumbing ------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_POST(self) -> None:
        self._dispatch(head=False)

    def _dispatch(self, head: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        with self.state.lock:
            self.state.requests.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        try:
            if path.startswith("/_hub/"):
                self._admin(path[len("/_hub/") :], query)
            elif path.startswith("/api/v1/"):
                self._modelscope(path[len("/api/v1/") :], query, head)
            elif path.startswith("/openapi/"):
                raise HubError(404, "ResourceNotFound", "not served by this stand-in; use the legacy API")
            elif path.startswith("/api/models/"):
                self._hf_api(path[len("/api/models/") :], query)
            elif "/resolve/" in path:
                self._hf_resolve(path.lstrip("/"), head)
            else:
                raise HubError(404, "NotFound", f"no route for {path}")
        except HubError as err:
            if path.startswith("/api/v1/"):
                self._json(
                    {"Code": err.status, "Message": err.message, "RequestId": "test", "Success": False},
                    status=err.status,
                )
            else:
                self._json(
                    {"error": err.message},
                    status=err.status,
                    headers={"X-Error-Code": err.code, "X-Error-Message": err.message},
                )
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _json(self, body: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        cookie = self.headers.get("Cookie", "")
        for part in cookie.split(";"):
            name, _, value = part.strip().partition("=")
            if name == "m_session_id" and value:
                return value
        return None

    def _repo(self, repo_id: str, not_found: HubError) -> Repo:
        repo = self.state.repos.get(repo_id)
        if repo is None:
            raise not_found
        return repo

    def _split_repo(self, rest: str) -> tuple[str, str]:
        parts = rest.split("/", 2)
        if len(parts) < 2:
            raise HubError(404, "RepoNotFound", "Repository not found")
        return f"{parts[0]}/{parts[1]}", (parts[2] if len(parts) > 2 else "")

    # -- Hugging Face Hub ---------------------------------------------------------------------
    def _hf_repo(self, repo_id: str) -> Repo:
        return self._repo(repo_id, HubError(401, "RepoNotFound", "Repository not found"))

    def _hf_commit(self, repo: Repo, revision: str) -> str:
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return commit

    def _hf_api(self, rest: str, query: dict[str, str]) -> None:
        repo_id, tail = self._split_repo(rest)
        repo = self._hf_repo(repo_id)
        if tail == "" or tail.startswith("revision/"):
            revision = tail[len("revision/") :] if tail else "main"
            commit = self._hf_commit(repo, revision)
            blobs = repo.commits[commit]
            with_blobs = query.get("blobs", "").lower() == "true"
            siblings = []
            for blob in blobs.values():
                sib: dict[str, Any] = {"rfilename": blob.path}
                if with_blobs:
                    sib["size"] = blob.size
                    sib["blobId"] = blob.git_oid
                    if blob.lfs:
                        sib["lfs"] = {"sha256": blob.sha256, "size": blob.size, "pointerSize": 134}
                siblings.append(sib)
            gated: bool | str = "manual" if repo.gated_tokens is not None else False
            self._json(
                {
                    "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24],  # noqa: S324 - opaque id
                    "id": repo_id,
                    "modelId": repo_id,
                    "author": repo_id.split("/")[0],
                    "sha": commit,
                    "private": False,
                    "gated": gated,
                    "disabled": False,
                    "downloads": 0,
                    "likes": 0,
                    "tags": ["safetensors"] if any(p.endswith(".safetensors") for p in blobs) else ["gguf"],
                    "lastModified": "2026-01-01T00:00:00.000Z",
                    "createdAt": "2026-01-01T00:00:00.000Z",
                    "siblings": siblings,
                }
            )
            return
        if tail.startswith("tree/"):
            rev_and_path = tail[len("tree/") :]
            revision, _, sub = rev_and_path.partition("/")
            commit = self._hf_commit(repo, revision)
            recursive = query.get("recursive", "").lower() == "true"
            entries: list[dict[str, Any]] = []
            dirs: set[str] = set()
            prefix = sub.strip("/") + "/" if sub.strip("/") else ""
            for blob in repo.commits[commit].values():
                if not blob.path.startswith(prefix):
                    continue
                rel = blob.path[len(prefix) :]
                if "/" in rel:
                    top = prefix + rel.split("/", 1)[0]
                    parents = (
                        [top]
                        if not recursive
                        else [prefix + "/".join(rel.split("/")[: i + 1]) for i in range(rel.count("/"))]
                    )
                    dirs.update(parents)
                    if not recursive:
                        continue
                entry: dict[str, Any] = {
                    "type": "file",
                    "oid": blob.git_oid,
                    "size": blob.size,
                    "path": blob.path,
                }
                if blob.lfs:
                    entry["lfs"] = {"oid": blob.sha256, "size": blob.size, "pointerSize": 134}
                entries.append(entry)
            entries += [
                {
                    "type": "directory",
                    "oid": hashlib.sha1(d.encode()).hexdigest(),  # noqa: S324
                    "size": 0,
                    "path": d,
                }
                for d in sorted(dirs)
            ]
            self._json(entries)
            return
        raise HubError(404, "NotFound", f"unsupported API path {tail}")

    def _hf_resolve(self, rest: str, head: bool) -> None:
        repo_part, _, file_part = rest.partition("/resolve/")
        repo_id = repo_part
        revision, _, filename = file_part.partition("/")
        repo = self._hf_repo(repo_id)
        commit = self._hf_commit(repo, revision)
        if repo.gated_tokens is not None:
            token = self._token()
            if token is None:
                raise HubError(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access "
                    "to it and be authenticated to access it. Please log in.",
                )
            if token not in repo.gated_tokens:
                raise HubError(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in "
                    "the authorized list. Visit the model page to ask for access.",
                )
        blob = repo.commits[commit].get(filename)
        if blob is None:
            self._json(
                {"error": "Entry not found"},
                status=404,
                headers={
                    "X-Error-Code": "EntryNotFound",
                    "X-Error-Message": "Entry not found",
                    "X-Repo-Commit": commit,
                },
            )
            return
        headers = {"X-Repo-Commit": commit, "ETag": f'"{blob.sha256 if blob.lfs else blob.git_oid}"'}
        if blob.lfs:
            headers["X-Linked-Etag"] = f'"{blob.sha256}"'
            headers["X-Linked-Size"] = str(blob.size)
        self._send_blob(repo_id, blob, head, headers)

    # -- ModelScope ---------------------------------------------------------------------------
    def _modelscope(self, rest: str, query: dict[str, str], head: bool) -> None:
        if rest.startswith("repos/"):
            raise HubError(404, "NotFound", "not available")
        if not rest.startswith("models/"):
            raise HubError(404, "NotFound", f"unsupported path {rest}")
        repo_id, tail = self._split_repo(rest[len("models/") :])
        repo = self._repo(repo_id, HubError(404, "NotFound", f"model {repo_id} does not exist"))
        if repo.gated_tokens is not None and self._token() not in repo.gated_tokens:
            raise HubError(
                401 if self._token() is None else 403,
                "Forbidden",
                f"model {repo_id} requires an authorised access token",
            )
        revision = query.get("Revision") or "master"
        if tail == "":
            commit = repo.branches.get("master") or next(iter(repo.branches.values()))
            self._json(
                _ms_envelope(
                    {
                        "Id": 1,
                        "Name": repo_id.split("/")[1],
                        "Path": repo_id.split("/")[0],
                        "Revision": commit,
                        "Visibility": 5,
                    }
                )
            )
            return
        if tail == "revisions":
            branches = [
                {"Revision": name, "CreatedAt": 1767225600, "CommitId": c}
                for name, c in repo.branches.items()
            ]
            tags = [
                {"Revision": name, "CreatedAt": 1767225600, "CommitId": c} for name, c in repo.tags.items()
            ]
            self._json(_ms_envelope({"RevisionMap": {"Branches": branches, "Tags": tags}}))
            return
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, "NotFound", f"revision {revision} of model {repo_id} does not exist")
        blobs = repo.commits[commit]
        if tail == "repo/files":
            files = [
                {
                    "Name": b.path.rsplit("/", 1)[-1],
                    "Path": b.path,
                    "Type": "blob",
                    "Size": b.size,
                    "Sha256": b.sha256,
                    "IsLFS": b.lfs,
                    "Revision": commit,
                    "CommitId": commit,
                    "Mode": "33188",
                }
                for b in blobs.values()
            ]
            self._json(_ms_envelope({"Files": files}))
            return
        if tail == "repo":
            blob = blobs.get(query.get("FilePath", ""))
            if blob is None:
                raise HubError(404, "NotFound", f"file {query.get('FilePath')} does not exist")
            self._send_blob(repo_id, blob, head, {"ETag": f'"{blob.sha256}"'})
            return
        raise HubError(404, "NotFound", f"unsupported path {tail}")

    # -- content ------------------------------------------------------------------------------
    def _send_blob(self, repo_id: str, blob: Blob, head: bool, headers: dict[str, str]) -> None:
        start, end = 0, blob.size - 1
        status = 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            first, _, last = rng[len("bytes=") :].split(",")[0].partition("-")
            if first == "":
                start = max(blob.size - int(last), 0)
            else:
                start = int(first)
                end = min(int(last), blob.size - 1) if last else blob.size - 1
            if start >= blob.size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{blob.size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        length = end - start + 1
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{blob.size}")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if head:
            return
        corrupt = self.state.take_corruption(repo_id, blob.path)
        with self.state.lock:
            gets = self.state.file_gets.setdefault(repo_id, {})
            gets[blob.path] = gets.get(blob.path, 0) + 1
        with blob.source.open("rb") as fh:
            fh.seek(start)
            left = length
            while left > 0:
                chunk = fh.read(min(CHUNK, left))
                if not chunk:
                    break
                if corrupt:
                    chunk = bytes(b ^ 0xFF for b in chunk[:64]) + chunk[64:]
                    corrupt = False
                bps = self.state.throttle_bps
                self.wfile.write(chunk)
                self.state.count(repo_id, blob.path, len(chunk))
                left -= len(chunk)
                if bps:
                    time.sleep(len(chunk) / bps)

    # -- test hooks ---------------------------------------------------------------------------
    def _admin(self, action: str, query: dict[str, str]) -> None:
        if action == "stats":
            self._json(self.state.stats())
        elif action == "reset" and self.command == "POST":
            self.state.reset()
            self._json({"ok": True})
        elif action == "throttle" and self.command == "POST":
            self.state.throttle_bps = int(query.get("bps", "0"))
            self._json({"ok": True})
        elif action == "corrupt" and self.command == "POST":
            with self.state.lock:
                self.state.corrupt[(query["repo"], query["path"])] = int(query.get("times", "1"))
            self._json({"ok": True})
        elif action == "add" and self.command == "POST":
            tokens = query.get("gated")
            commit = self.state.add_repo(
                query["repo"],
                Path(query["dir"]),
                query.get("branch", "main"),
                set(tokens.split("+")) if tokens is not None else None,
                tag=query.get("tag"),
            )
            self._json({"commit": commit})
        else:
            raise HubError(404, "NotFound", f"unknown test hook {action}")


def _ms_envelope(data: Any) -> dict[str, Any]:
    return {"Code": 200, "Data": data, "Message": "success", "RequestId": "test", "Success": True}


def make_server(host: str, port: int, state: HubState | None = None) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": state or HubState()})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


# -- a small model folder, written by hand ------------------------------------------------------
def _prng_bytes(seed: str, size: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    """Write the safetensors format: u64 header length, JSON header, raw tensor bytes."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for _, _, data in tensors.values():
            fh.write(data)


def make_model(
    out: Path, shards: int = 2, shard_bytes: int = 1 << 20, gguf_only: bool = False, seed: str = "vllm-fleet"
) -> Path:
    """A small Llama-shaped model folder with sharded safetensors (or only a GGUF file)."""
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": shards,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 256,
        "max_position_embeddings": 512,
        "torch_dtype": "float32",
        "tie_word_embeddings": False,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "README.md").write_text(f"# test model {seed}\n")
    (out / ".gitattributes").write_text(
        "*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.gguf filter=lfs diff=lfs merge=lfs -text\n"
    )
    if gguf_only:
        (out / "model-Q4_K_M.gguf").write_bytes(
            b"GGUF" + struct.pack("<I", 3) + _prng_bytes(seed, shard_bytes)
        )
        return out
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}) + "\n")
    vocab = {chr(c): c for c in range(32, 127)}
    (out / "tokenizer.json").write_text(
        json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": vocab, "merges": []}}) + "\n"
    )
    (out / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512}) + "\n")
    weight_map: dict[str, str] = {}
    total = 0
    floats = shard_bytes // 4
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        tensor = f"model.layers.{i}.mlp.weight"
        data = _prng_bytes(f"{seed}:{i}", floats * 4)
        write_safetensors(out / name, {tensor: ("F32", [floats], data)})
        weight_map[tensor] = name
        total += len(data)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return out


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


def make_lora(
    out: Path, base_config: Path, rank: int = 8, seed: str = "vllm-fleet-lora", alpha: int = 16
) -> Path:
    """A small PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) for the Llama-shaped
    model whose config.json is ``base_config``: the attention projections of every layer, rank ``rank``,
    float32 weights drawn uniformly from +-0.05 by a generator seeded with ``seed`` (deterministic)."""
    import random

    cfg = json.loads(base_config.read_text())
    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    kv = int(cfg.get("num_key_value_heads") or heads) * head_dim
    shapes = {
        "q_proj": (hidden, heads * head_dim),
        "k_proj": (hidden, kv),
        "v_proj": (hidden, kv),
        "o_proj": (heads * head_dim, hidden),
    }  # (in, out)
    rng = random.Random(seed)

    def floats(n: int) -> bytes:
        return struct.pack(f"<{n}f", *(rng.uniform(-0.05, 0.05) for _ in range(n)))

    tensors: dict[str, tuple[str, list[int], bytes]] = {}
    for layer in range(int(cfg["num_hidden_layers"])):
        for target in LORA_TARGETS:
            d_in, d_out = shapes[target]
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{target}"
            tensors[f"{prefix}.lora_A.weight"] = ("F32", [rank, d_in], floats(rank * d_in))
            tensors[f"{prefix}.lora_B.weight"] = ("F32", [d_out, rank], floats(d_out * rank))
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "adapter_model.safetensors", tensors)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(cfg.get("_name_or_path") or "tiny"),
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "target_modules": list(LORA_TARGETS),
        "modules_to_save": None,
        "inference_mode": True,
    }
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "README.md").write_text(f"# test LoRA adapter {seed} (rank {rank})\n")
    return out


def _parse_repo_arg(value: str) -> tuple[str, Path, str, set[str] | None, str | None]:
    spec, _, opts = value.partition(",")
    repo_id, _, folder = spec.partition("=")
    branch, gated, tag = "main", None, None
    for opt in filter(None, opts.split(",")):
        key, _, val = opt.partition("=")
        if key == "gated":
            gated = set(filter(None, val.split("+")))
        elif key == "branch":
            branch = val
        elif key == "tag":
            tag = val
        else:
            raise SystemExit(f"unknown repo option {key!r} in {value!r}")
    return repo_id, Path(folder), branch, gated, tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="serve repositories")
    serve.add_argument("--host", default="0.0.0.0")  # noqa: S104 - test server inside a test network
    serve.add_argument("--port", type=int, default=8990)
    serve.add_argument("--repo", action="append", default=[], help="ORG/NAME=DIR[,gated=T1+T2][,branch=B]")
    make = sub.add_parser("make-model", help="write a small test model folder")
    make.add_argument("out", type=Path)
    make.add_argument("--shards", type=int, default=2)
    make.add_argument("--shard-bytes", type=int, default=1 << 20)
    make.add_argument("--gguf-only", action="store_true")
    make.add_argument("--seed", default="vllm-fleet")
    lora = sub.add_parser("make-lora", help="write a small LoRA adapter folder for a model")
    lora.add_argument("out", type=Path)
    lora.add_argument("--base-config", type=Path, required=True, help="the base model's config.json")
    lora.add_argument("--rank", type=int, default=8)
    lora.add_argument("--seed", default="vllm-fleet-lora")
    args = parser.parse_args(argv)
    if args.cmd == "make-lora":
        make_lora(args.out, args.base_config, args.rank, args.seed)
        print(args.out)
        return 0
    if args.cmd == "make-model":
        make_model(args.out, args.shards, args.shard_bytes, args.gguf_only, args.seed)
        print(args.out)
        return 0
    state = HubState()
    for value in args.repo:
        repo_id, folder, branch, gated, tag = _parse_repo_arg(value)
        commit = state.add_repo(repo_id, folder, branch, gated, tag=tag)
        print(f"hub: {repo_id}@{branch} = {commit} from {folder}", flush=True)
    server = make_server(args.host, args.port, state)
    print(f"hub: listening on {args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
