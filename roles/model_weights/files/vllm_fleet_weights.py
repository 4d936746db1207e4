"""Pure logic of the model weights fetcher: layout, patterns, format checks, disk space, writer lock,
verification and the manifest. Standard library only, so GPU nodes can run the read-only parts
(waiting for a verified copy) with the system python.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_NAME = ".vllm-fleet-manifest.json"
LOCK_NAME = ".vllm-fleet-writer.lock"
STAGING_PREFIX = ".staging-"
REFS_DIR = "refs"
MANIFEST_FORMAT = 1
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
OTHER_WEIGHT_SUFFIXES = (
    ".bin",
    ".pt",
    ".pth",
    ".gguf",
    ".h5",
    ".msgpack",
    ".onnx",
    ".ckpt",
    ".ot",
    ".tflite",
)
METADATA_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "model.safetensors.index.json",
    "pytorch_model.bin.index.json",
    "preprocessor_config.json",
    "chat_template.jinja",
    "configuration.json",
)
HASH_BLOCK = 4 << 20


class WeightsError(Exception):
    """A failure with a stable code, what went wrong, and how to fix it."""

    def __init__(self, code: str, message: str, fix: str) -> None:
        super().__init__(f"{message} Fix: {fix}")
        self.code, self.message, self.fix = code, message, fix

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "fix": self.fix}


@dataclass(frozen=True)
class RemoteFile:
    """One file of a model revision as the hub describes it."""

    path: str
    size: int
    sha256: str | None = None
    git_oid: str | None = None

    @property
    def is_metadata(self) -> bool:
        name = self.path.rsplit("/", 1)[-1]
        return name in METADATA_FILES or (name.endswith(".json") and "/" not in self.path)


@dataclass
class Plan:
    """What one model resolves to: an immutable revision id and the exact files to hold."""

    name: str
    source: str
    repo_id: str
    requested_revision: str
    revision: str
    revision_kind: str  # commit | listing-digest
    files: list[RemoteFile]
    gated: bool = False
    skipped: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


# -- layout ----------------------------------------------------------------------------------------
def check_repo_id(repo_id: str) -> None:
    if not REPO_ID_RE.match(repo_id or "") or ".." in repo_id:
        raise WeightsError(
            "bad_repo_id",
            f"Repository id {repo_id!r} is not of the form ORG/NAME.",
            "Set repo_id in model_weights_models to ORG/NAME, e.g. Qwen/Qwen2.5-0.5B-Instruct.",
        )


def model_dir(root: str | Path, repo_id: str) -> Path:
    check_repo_id(repo_id)
    org, name = repo_id.split("/")
    return Path(root) / org / name


def final_dir(root: str | Path, repo_id: str, revision: str) -> Path:
    return model_dir(root, repo_id) / revision


def staging_dir(root: str | Path, repo_id: str, revision: str) -> Path:
    return model_dir(root, repo_id) / f"{STAGING_PREFIX}{revision}"


def ref_path(root: str | Path, repo_id: str, requested_revision: str) -> Path:
    safe = requested_revision.replace("/", "%2F")
    return model_dir(root, repo_id) / REFS_DIR / safe


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_ref(root: str | Path, repo_id: str, requested_revision: str, revision: str) -> bool:
    """Record which immutable revision a branch or tag resolved to; True when it changed."""
    if requested_revision == revision:
        return False
    path = ref_path(root, repo_id, requested_revision)
    try:
        if path.read_text().strip() == revision:
            return False
    except FileNotFoundError:
        pass
    atomic_write(path, (revision + "\n").encode())
    return True


def read_ref(root: str | Path, repo_id: str, requested_revision: str) -> str | None:
    if COMMIT_RE.match(requested_revision):
        return requested_revision
    try:
        return ref_path(root, repo_id, requested_revision).read_text().strip() or None
    except FileNotFoundError:
        return None


# -- file selection and format -------------------------------------------------------------------------
def _normalise(patterns: Sequence[str] | str | None) -> list[str]:
    if patterns is None:
        return []
    items = [patterns] if isinstance(patterns, str) else list(patterns)
    return [p + "*" if p.endswith("/") else p for p in items]


def filter_paths(
    paths: Iterable[str], allow: Sequence[str] | str | None = None, ignore: Sequence[str] | str | None = None
) -> list[str]:
    """Same semantics as the hub clients: keep paths matching any allow pattern and no ignore pattern."""
    allow_p, ignore_p = _normalise(allow), _normalise(ignore)
    kept = []
    for path in paths:
        if allow_p and not any(fnmatch.fnmatch(path, p) for p in allow_p):
            continue
        if ignore_p and any(fnmatch.fnmatch(path, p) for p in ignore_p):
            continue
        kept.append(path)
    return kept


def select_files(
    files: Sequence[RemoteFile],
    allow: Sequence[str] | str | None,
    ignore: Sequence[str] | str | None,
    repo_label: str,
) -> tuple[list[RemoteFile], list[str]]:
    """Apply patterns, refuse repositories vLLM cannot load from safetensors/bin, and, when safetensors
    exist and no allow patterns were given, skip duplicate weight formats (pytorch .bin, GGUF, ...)."""
    by_path = {f.path: f for f in files}
    kept = filter_paths(by_path, allow, ignore)
    skipped: list[str] = []
    has_safetensors = any(p.endswith(".safetensors") for p in kept)
    if has_safetensors and not allow:
        skipped = [p for p in kept if p.endswith(OTHER_WEIGHT_SUFFIXES) and not p.endswith(".index.json")]
        kept = [p for p in kept if p not in skipped]
    weights = [p for p in kept if p.endswith(WEIGHT_SUFFIXES)]
    if not weights:
        ggufs = [p for p in by_path if p.endswith(".gguf")]
        if ggufs and not any(p.endswith(WEIGHT_SUFFIXES) for p in by_path):
            raise WeightsError(
                "gguf_only",
                f"{repo_label} holds only GGUF files ({', '.join(sorted(ggufs)[:3])}); the fleet serves "
                "safetensors checkpoints.",
                "Point repo_id at the original safetensors repository of this model (GGUF repositories are "
                "quantised copies for llama.cpp).",
            )
        raise WeightsError(
            "no_weights",
            f"{repo_label} has no .safetensors or .bin weight files after allow_patterns/ignore_patterns "
            f"({len(kept)} files kept of {len(by_path)}).",
            "Check repo_id and the allow_patterns/ignore_patterns of this model in model_weights_models.",
        )
    return [by_path[p] for p in kept], skipped


def listing_digest(files: Sequence[RemoteFile]) -> str:
    """An immutable id for a revision whose hub reports no commit id: changes whenever any file does."""
    digest = hashlib.sha1()  # noqa: S324 - content id, not security
    for f in sorted(files, key=lambda f: f.path):
        digest.update(f"{f.path}\0{f.size}\0{f.sha256 or f.git_oid or ''}\n".encode())
    return digest.hexdigest()


# -- disk space --------------------------------------------------------------------------------------
def free_bytes(path: Path) -> int:
    probe = path
    while not probe.exists():
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def missing_bytes(files: Sequence[RemoteFile], directory: Path) -> int:
    """Bytes still to transfer into DIRECTORY (files already there at full size count as done)."""
    total = 0
    for f in files:
        try:
            have = (directory / f.path).stat().st_size
        except FileNotFoundError:
            have = -1
        if have != f.size:
            total += f.size
    return total


def check_disk_space(
    directory: Path,
    needed: int,
    margin_bytes: int,
    margin_ratio: float,
    label: str,
    free: Callable[[Path], int] = free_bytes,
) -> dict[str, int]:
    required = needed + max(margin_bytes, int(needed * margin_ratio))
    available = free(directory)
    if available < required:
        raise WeightsError(
            "disk_full",
            f"Not enough space for {label} under {directory}: {_gib(needed)} to download plus "
            f"{_gib(required - needed)} margin needs {_gib(required)}, only {_gib(available)} free.",
            "Free space on the model storage (old revisions live next to the new one), enlarge it, or "
            "lower model_weights_disk_margin_gb / model_weights_disk_margin_ratio.",
        )
    return {"needed": needed, "required": required, "free": available}


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 26 else f"{n / (1 << 20):.1f} MiB"


# -- hashing and verification -------------------------------------------------------------------------
def hash_file(path: Path, want_sha256: bool = True, want_git: bool = False) -> tuple[str | None, str | None]:
    sha = hashlib.sha256() if want_sha256 else None
    git = None
    if want_git:
        git = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - git object id
    with path.open("rb") as fh:
        while block := fh.read(HASH_BLOCK):
            if sha is not None:
                sha.update(block)
            if git is not None:
                git.update(block)
    return (sha.hexdigest() if sha else None, git.hexdigest() if git else None)


def verify_file(directory: Path, f: RemoteFile) -> str | None:
    """None when the file matches the hub's metadata, else why not."""
    path = directory / f.path
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    if size != f.size:
        return f"size {size} != {f.size}"
    sha, git = hash_file(
        path, want_sha256=f.sha256 is not None, want_git=f.sha256 is None and bool(f.git_oid)
    )
    if f.sha256 is not None and sha != f.sha256:
        return f"sha256 {sha} != {f.sha256}"
    if f.sha256 is None and f.git_oid and git != f.git_oid:
        return f"git blob id {git} != {f.git_oid}"
    return None


def verify_tree(directory: Path, files: Sequence[RemoteFile], workers: int = 4) -> dict[str, str]:
    """Verify every file (hashing in parallel threads); returns {path: reason} for the bad ones."""
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(lambda f: (f.path, verify_file(directory, f)), files))
    return {path: reason for path, reason in results if reason is not None}


# -- manifest ---------------------------------------------------------------------------------------
def build_manifest(plan: Plan, endpoint: str | None) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "name": plan.name,
        "source": plan.source,
        "repo_id": plan.repo_id,
        "requested_revision": plan.requested_revision,
        "revision": plan.revision,
        "revision_kind": plan.revision_kind,
        "endpoint": endpoint,
        "total_bytes": plan.total_bytes,
        "files": [asdict(f) for f in sorted(plan.files, key=lambda f: f.path)],
        "skipped": sorted(plan.skipped),
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "verified_by": socket.gethostname(),
    }


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    atomic_write(directory / MANIFEST_NAME, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())


def read_manifest(directory: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((directory / MANIFEST_NAME).read_text())
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("format") == MANIFEST_FORMAT else None


def manifest_files(manifest: dict[str, Any]) -> list[RemoteFile]:
    return [RemoteFile(**f) for f in manifest.get("files", [])]


def check_present(directory: Path, plan: Plan | None, full: bool = False) -> str | None:
    """None when DIRECTORY holds a verified copy (of PLAN's files when given): manifest present, matching
    the plan, every file at its recorded size (and hash when FULL). Otherwise why not."""
    manifest = read_manifest(directory)
    if manifest is None:
        return "no manifest"
    recorded = {f.path: f for f in manifest_files(manifest)}
    if plan is not None:
        wanted = {f.path: f for f in plan.files}
        if set(wanted) != set(recorded):
            return "file set differs from the hub"
        for path, f in wanted.items():
            r = recorded[path]
            if (
                r.size != f.size
                or (f.sha256 and r.sha256 != f.sha256)
                or (f.git_oid and r.git_oid and r.git_oid != f.git_oid)
            ):
                return f"{path} differs from the hub"
    if full:
        bad = verify_tree(directory, list(recorded.values()))
        return f"verification failed: {bad}" if bad else None
    for f in recorded.values():
        try:
            if (directory / f.path).stat().st_size != f.size:
                return f"{f.path} has the wrong size"
        except FileNotFoundError:
            return f"{f.path} is missing"
    return None


# -- writer lock -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LockInfo:
    host: str
    pid: int
    token: str
    started: float


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_is_stale(
    info: LockInfo | None,
    mtime: float,
    now: float,
    stale_after: float,
    local_host: str,
    alive: Callable[[int], bool] = pid_alive,
) -> bool:
    """A lock is stale when its owner is a dead process on this host, or its heartbeat (the file's
    mtime) is older than STALE_AFTER seconds (owner on another host, or unreadable content)."""
    if info is not None and info.host == local_host and not alive(info.pid):
        return True
    return now - mtime > stale_after


class LockLost(Exception):
    pass


class WriterLock:
    """One writer per model directory on shared storage. The lock file holds owner host, pid and a
    token; the owner refreshes its mtime (heartbeat) so waiters on other hosts can tell a crashed
    owner from a slow one. Takeover of a stale lock is serialised through a second O_EXCL file."""

    def __init__(
        self,
        path: Path,
        stale_after: float = 600.0,
        heartbeat: float = 15.0,
        poll: float = 2.0,
        host: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.breaker = self.path.with_name(self.path.name + ".break")
        self.stale_after, self.heartbeat, self.poll = stale_after, heartbeat, poll
        self.host = host or socket.gethostname()
        self.clock = clock
        self.token = uuid.uuid4().hex
        self.waited = 0.0
        self.took_over: LockInfo | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False

    def read(self) -> tuple[LockInfo | None, float] | None:
        try:
            mtime = self.path.stat().st_mtime
            raw = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            return LockInfo(
                str(data["host"]), int(data["pid"]), str(data["token"]), float(data["started"])
            ), mtime
        except (ValueError, KeyError, TypeError):
            return None, mtime

    def try_acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as fh:
            json.dump(
                {"host": self.host, "pid": os.getpid(), "token": self.token, "started": self.clock()}, fh
            )
            fh.flush()
            os.fsync(fh.fileno())
        return True

    def break_if_stale(self) -> bool:
        """Remove the lock when stale; True when it was removed (by us)."""
        current = self.read()
        if current is None:
            return False
        info, mtime = current
        if not lock_is_stale(info, mtime, self.clock(), self.stale_after, self.host):
            return False
        try:
            fd = os.open(self.breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                if self.clock() - self.breaker.stat().st_mtime > 60:
                    self.breaker.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            return False
        os.close(fd)
        try:
            again = self.read()
            if (
                again is None
                or again[0] != info
                or not lock_is_stale(again[0], again[1], self.clock(), self.stale_after, self.host)
            ):
                return False
            self.path.unlink(missing_ok=True)
            self.took_over = info
            return True
        finally:
            self.breaker.unlink(missing_ok=True)

    def acquire(self, timeout: float, on_wait: Callable[[LockInfo | None], None] | None = None) -> None:
        start = self.clock()
        while True:
            if self.try_acquire():
                self.waited = self.clock() - start
                self._start_heartbeat()
                return
            if self.break_if_stale():
                continue
            if self.clock() - start > timeout:
                current = self.read()
                owner = current[0] if current else None
                who = f"{owner.host} (pid {owner.pid})" if owner else "an unknown owner"
                raise WeightsError(
                    "lock_timeout",
                    f"Waited {timeout:.0f}s for the writer lock {self.path} held by {who}.",
                    "Let that download finish, or if its host is gone wait model_weights_lock_stale_seconds "
                    f"for the lock to go stale (or delete {self.path}); raise model_weights_lock_timeout "
                    "for very large models.",
                )
            if on_wait is not None:
                current = self.read()
                on_wait(current[0] if current else None)
            time.sleep(self.poll)

    def _start_heartbeat(self) -> None:
        def beat() -> None:
            while not self._stop.wait(self.heartbeat):
                if not self.still_held():
                    self.lost = True
                    return
                try:
                    os.utime(self.path)
                except FileNotFoundError:
                    self.lost = True
                    return

        self._thread = threading.Thread(target=beat, name="lock-heartbeat", daemon=True)
        self._thread.start()

    def still_held(self) -> bool:
        current = self.read()
        return current is not None and current[0] is not None and current[0].token == self.token

    def ensure_held(self) -> None:
        if self.lost or not self.still_held():
            raise WeightsError(
                "lock_lost",
                f"Another writer took over {self.path} while this one was working (heartbeat missed for "
                f"more than {self.stale_after:.0f}s).",
                "Raise model_weights_lock_stale_seconds above the longest stall of the storage, then re-run.",
            )

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.still_held():
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
