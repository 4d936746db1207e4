"""Pure logic of the model weights fetcher: patterns, format checks, disk space, lock, manifest, verify."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "roles" / "model_weights" / "files"))

import vllm_fleet_weights as w  # noqa: E402


def rf(path: str, data: bytes = b"", lfs: bool = True) -> w.RemoteFile:
    sha = hashlib.sha256(data).hexdigest() if lfs else None
    git = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
    return w.RemoteFile(path, len(data), sha, git)


@pytest.mark.parametrize(
    ("paths", "allow", "ignore", "expected"),
    [
        (["a.json", "b.safetensors", "sub/c.bin"], None, None, ["a.json", "b.safetensors", "sub/c.bin"]),
        (["a.json", "b.safetensors", "sub/c.bin"], ["*.safetensors"], None, ["b.safetensors"]),
        (["a.json", "b.safetensors", "sub/c.bin"], None, ["sub/"], ["a.json", "b.safetensors"]),
        (["a.json", "b.safetensors"], "*.json", None, ["a.json"]),
        (["original/x.pth", "m.safetensors"], None, ["original/*"], ["m.safetensors"]),
    ],
)
def test_filter_paths_matches_client_semantics(paths, allow, ignore, expected):
    assert w.filter_paths(paths, allow, ignore) == expected


def test_select_files_skips_duplicate_formats_when_safetensors_exist():
    files = [
        rf("config.json", b"{}", False),
        rf("model.safetensors", b"x"),
        rf("pytorch_model.bin", b"y"),
        rf("model-q4.gguf", b"z"),
        rf("pytorch_model.bin.index.json", b"{}", False),
    ]
    kept, skipped = w.select_files(files, None, None, "org/m")
    assert [f.path for f in kept] == ["config.json", "model.safetensors", "pytorch_model.bin.index.json"]
    assert skipped == ["pytorch_model.bin", "model-q4.gguf"]


def test_select_files_keeps_bin_when_asked_explicitly():
    files = [rf("model.safetensors", b"x"), rf("pytorch_model.bin", b"y")]
    kept, skipped = w.select_files(files, ["*.bin"], None, "org/m")
    assert [f.path for f in kept] == ["pytorch_model.bin"] and skipped == []


@pytest.mark.parametrize(
    ("paths", "code"),
    [
        (["README.md", "model-Q4_K_M.gguf", "model-Q8_0.gguf"], "gguf_only"),
        (["README.md", "config.json"], "no_weights"),
    ],
)
def test_select_files_refuses_unservable_repositories(paths, code):
    with pytest.raises(w.WeightsError) as err:
        w.select_files([rf(p, b"1") for p in paths], None, None, "org/m")
    assert err.value.code == code
    assert "repo_id" in err.value.fix


def test_listing_digest_changes_with_content_only():
    a = [rf("a.safetensors", b"1"), rf("config.json", b"{}", False)]
    assert w.listing_digest(a) == w.listing_digest(list(reversed(a)))
    assert w.listing_digest(a) != w.listing_digest([rf("a.safetensors", b"2"), a[1]])
    assert w.COMMIT_RE.match(w.listing_digest(a))


@pytest.mark.parametrize("repo_id", ["noslash", "a/b/c", "../x", "org/..", "", "org/ name"])
def test_bad_repo_ids_are_refused(repo_id):
    with pytest.raises(w.WeightsError):
        w.model_dir("/srv/models", repo_id)


def test_layout(tmp_path):
    assert w.final_dir(tmp_path, "Qwen/Qwen2.5-0.5B", "a" * 40) == tmp_path / "Qwen" / "Qwen2.5-0.5B" / (
        "a" * 40
    )
    assert w.staging_dir(tmp_path, "o/n", "r").name == ".staging-r"
    assert w.write_ref(tmp_path, "o/n", "main", "c" * 40) is True
    assert w.write_ref(tmp_path, "o/n", "main", "c" * 40) is False
    assert w.read_ref(tmp_path, "o/n", "main") == "c" * 40
    assert w.read_ref(tmp_path, "o/n", "d" * 40) == "d" * 40
    assert w.write_ref(tmp_path, "o/n", "e" * 40, "e" * 40) is False
    assert w.read_ref(tmp_path, "o/n", "refs/pr/1") is None


@pytest.mark.parametrize(
    ("needed", "free", "margin", "ratio", "ok"),
    [
        (10 << 30, 12 << 30, 1 << 30, 0.05, True),
        (10 << 30, 10 << 30, 1 << 30, 0.05, False),  # margin not met
        (100 << 30, 104 << 30, 1 << 30, 0.05, False),  # ratio margin (5 GiB) beats the fixed 1 GiB
        (0, 2 << 30, 1 << 30, 0.05, True),
    ],
)
def test_disk_check(tmp_path, needed, free, margin, ratio, ok):
    def fake_free(_: Path) -> int:
        return free

    if ok:
        assert w.check_disk_space(tmp_path, needed, margin, ratio, "org/m", free=fake_free)["free"] == free
    else:
        with pytest.raises(w.WeightsError) as err:
            w.check_disk_space(tmp_path, needed, margin, ratio, "org/m", free=fake_free)
        assert err.value.code == "disk_full"
        assert "model_weights_disk_margin_gb" in err.value.fix


def test_missing_bytes_counts_only_incomplete_files(tmp_path):
    (tmp_path / "done.safetensors").write_bytes(b"12345")
    (tmp_path / "half.safetensors").write_bytes(b"12")
    files = [rf("done.safetensors", b"12345"), rf("half.safetensors", b"1234"), rf("new.safetensors", b"123")]
    assert w.missing_bytes(files, tmp_path) == 4 + 3


def test_verify_file_detects_size_sha_and_git_mismatch(tmp_path):
    (tmp_path / "w.safetensors").write_bytes(b"weights")
    (tmp_path / "config.json").write_bytes(b"{}")
    good_lfs, good_git = rf("w.safetensors", b"weights"), rf("config.json", b"{}", lfs=False)
    assert w.verify_file(tmp_path, good_lfs) is None
    assert w.verify_file(tmp_path, good_git) is None
    assert w.verify_file(tmp_path, rf("gone.safetensors", b"x")) == "missing"
    assert w.verify_file(tmp_path, rf("w.safetensors", b"weightz")).startswith("sha256")
    assert w.verify_file(tmp_path, rf("w.safetensors", b"weights!")).startswith("size")
    assert w.verify_file(tmp_path, rf("config.json", b"[]", lfs=False)).startswith("git blob id")
    assert w.verify_tree(tmp_path, [good_lfs, rf("config.json", b"[]", lfs=False)]) == {
        "config.json": w.verify_file(tmp_path, rf("config.json", b"[]", lfs=False))
    }


def _plan(files: list[w.RemoteFile]) -> w.Plan:
    return w.Plan("m", "huggingface", "org/m", "main", "c" * 40, "commit", files)


def test_manifest_round_trip_and_present_check(tmp_path):
    files = [rf("model.safetensors", b"abc"), rf("config.json", b"{}", False)]
    for f, data in zip(files, [b"abc", b"{}"], strict=True):
        (tmp_path / f.path).write_bytes(data)
    plan = _plan(files)
    assert w.check_present(tmp_path, plan) == "no manifest"
    w.write_manifest(tmp_path, w.build_manifest(plan, "https://hub"))
    manifest = w.read_manifest(tmp_path)
    assert manifest["revision"] == "c" * 40 and manifest["total_bytes"] == 5
    assert sorted(f.path for f in w.manifest_files(manifest)) == ["config.json", "model.safetensors"]
    assert w.check_present(tmp_path, plan) is None
    assert w.check_present(tmp_path, None, full=True) is None
    # the hub changed a file: not present any more
    assert "differs" in w.check_present(tmp_path, _plan([rf("model.safetensors", b"abd"), files[1]]))
    # same size, flipped bytes: only the full check notices
    (tmp_path / "model.safetensors").write_bytes(b"abd")
    assert w.check_present(tmp_path, plan) is None
    assert w.check_present(tmp_path, plan, full=True).startswith("verification failed")
    (tmp_path / "model.safetensors").unlink()
    assert "missing" in w.check_present(tmp_path, plan)


@pytest.mark.parametrize(
    ("owner_host", "alive", "age", "stale"),
    [
        ("here", True, 5, False),  # live local owner, fresh heartbeat
        ("here", False, 5, True),  # dead local owner: stale at once
        ("there", True, 5, False),  # remote owner, fresh heartbeat
        ("there", True, 700, True),  # remote owner, heartbeat too old
        ("here", True, 700, True),  # live pid but no heartbeat for too long (pid reused)
        (None, True, 5, False),  # unreadable lock, fresh: wait
        (None, True, 700, True),  # unreadable lock, old
    ],
)
def test_lock_staleness(owner_host, alive, age, stale):
    info = None if owner_host is None else w.LockInfo(owner_host, 1234, "t", 0.0)
    assert w.lock_is_stale(info, 1000.0 - age, 1000.0, 600, "here", alive=lambda _: alive) is stale


def test_lock_excludes_second_writer_and_releases(tmp_path):
    a = w.WriterLock(tmp_path / "l", heartbeat=0.05, poll=0.01)
    b = w.WriterLock(tmp_path / "l", heartbeat=0.05, poll=0.01)
    a.acquire(timeout=1)
    assert not b.try_acquire()
    assert not b.break_if_stale()
    with pytest.raises(w.WeightsError) as err:
        b.acquire(timeout=0.1)
    assert err.value.code == "lock_timeout" and "model_weights_lock_stale_seconds" in err.value.fix
    a.release()
    assert not (tmp_path / "l").exists()
    b.acquire(timeout=1)
    b.ensure_held()
    b.release()


def test_waiter_gets_lock_when_holder_releases(tmp_path):
    a = w.WriterLock(tmp_path / "l", heartbeat=0.05, poll=0.01)
    a.acquire(timeout=1)
    threading.Timer(0.2, a.release).start()
    b = w.WriterLock(tmp_path / "l", heartbeat=0.05, poll=0.01)
    b.acquire(timeout=5)
    assert b.waited >= 0.15 and b.took_over is None
    b.release()


def test_stale_lock_of_dead_local_process_is_taken_over(tmp_path):
    path = tmp_path / "l"
    path.write_text(json.dumps({"host": "here", "pid": 999999, "token": "old", "started": 0}))
    lock = w.WriterLock(path, host="here", poll=0.01)
    lock.acquire(timeout=1)
    assert lock.took_over is not None and lock.took_over.token == "old"
    assert json.loads(path.read_text())["token"] == lock.token
    lock.release()


def test_stale_lock_of_other_host_taken_over_only_after_heartbeat_age(tmp_path):
    path = tmp_path / "l"
    path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "token": "old", "started": 0}))
    lock = w.WriterLock(path, host="here", stale_after=600, poll=0.01)
    assert not lock.break_if_stale()
    old = time.time() - 601
    os.utime(path, (old, old))
    lock.acquire(timeout=1)
    assert lock.took_over.host == "elsewhere"
    lock.release()


def test_heartbeat_keeps_lock_fresh_and_detects_loss(tmp_path):
    path = tmp_path / "l"
    lock = w.WriterLock(path, heartbeat=0.05, poll=0.01)
    lock.acquire(timeout=1)
    old = time.time() - 1000
    os.utime(path, (old, old))
    time.sleep(0.3)
    assert time.time() - path.stat().st_mtime < 5
    # another writer broke the lock and took it: the owner notices and refuses to publish
    path.write_text(json.dumps({"host": "x", "pid": 1, "token": "thief", "started": 0}))
    time.sleep(0.3)
    with pytest.raises(w.WeightsError) as err:
        lock.ensure_held()
    assert err.value.code == "lock_lost"
    lock.release()
    assert json.loads(path.read_text())["token"] == "thief"


def test_only_one_of_many_racing_breakers_wins(tmp_path):
    path = tmp_path / "l"
    path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "token": "old", "started": 0}))
    old = time.time() - 1000
    os.utime(path, (old, old))
    winners: list[str] = []
    barrier = threading.Barrier(8)

    def contend() -> None:
        lock = w.WriterLock(path, host="here", poll=0.01, heartbeat=10)
        barrier.wait()
        for _ in range(50):
            if lock.try_acquire():
                winners.append(lock.token)
                return
            lock.break_if_stale()

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert json.loads(path.read_text())["token"] == winners[0]
