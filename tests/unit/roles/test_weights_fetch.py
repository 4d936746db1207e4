"""The fetch CLI end to end: the real hub clients (huggingface_hub, modelscope) against the local hub
stand-in, writing to a local folder that plays the shared storage."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hub.harness import FETCH, HubThread, client_python, fetch_cmd, run_fetch, tree_fingerprint, write_spec
from hub.server import make_lora, make_model

REPO = "vllm-fleet-test/tiny"


@pytest.fixture(scope="module")
def python() -> Path:
    return client_python()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return make_model(tmp_path / "model-v1", shards=3, shard_bytes=512 * 1024)


def spec_for(root: Path, hub_url: str, **model: object) -> dict:
    entry = {
        "name": "tiny",
        "source": "huggingface",
        "repo_id": REPO,
        "revision": "main",
        "endpoint": hub_url,
    }
    entry.update(model)
    return {
        "root": str(root),
        "disk_margin_bytes": 0,
        "disk_margin_ratio": 0.0,
        "lock_poll_seconds": 0.2,
        "models": [entry],
    }


def model_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("source", ["huggingface", "modelscope"])
def test_happy_path_then_second_run_fetches_nothing(python, model, tmp_path, source):
    root = tmp_path / "models"
    with HubThread() as hub:
        commit = hub.state.add_repo(REPO, model, branch="main" if source == "huggingface" else "master")
        spec = spec_for(
            root, hub.url, source=source, revision="main" if source == "huggingface" else "master"
        )
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        res = out["models"]["tiny"]
        assert out["changed"] is True and res["status"] == "fetched"
        assert hub.bytes(REPO) == model_size(model), "every byte fetched exactly once"
        final = Path(res["path"])
        if source == "huggingface":
            assert res["revision"] == commit and res["revision_kind"] == "commit"
        else:
            assert res["revision_kind"] == "listing-digest"
        assert final == root / "vllm-fleet-test" / "tiny" / res["revision"]
        assert res["config"]["model_type"] == "llama"
        manifest = json.loads((final / ".vllm-fleet-manifest.json").read_text())
        assert {f["path"] for f in manifest["files"]} == {
            p.relative_to(model).as_posix() for p in model.rglob("*") if p.is_file()
        }
        assert all(f["sha256"] for f in manifest["files"] if f["path"].endswith(".safetensors"))
        assert not (final / ".cache").exists()
        assert not list(final.parent.glob(".staging-*"))
        assert (final.parent / "refs" / spec["models"][0]["revision"]).read_text().strip() == res["revision"]
        before = tree_fingerprint(final)

        served = hub.stats()["requests"]
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        assert out["changed"] is False and out["models"]["tiny"]["status"] == "present"
        assert hub.bytes(REPO) == model_size(model), "second run downloaded nothing"
        assert hub.stats()["requests"] - served <= 3, "second run made metadata calls only"
        assert tree_fingerprint(final) == before


def test_a_lora_adapter_is_fetched_and_verified_like_any_weights(python, model, tmp_path):
    # a LoRA adapter repository has no config.json: adapter_config.json and adapter_model.safetensors
    adapter = make_lora(tmp_path / "lora", model / "config.json", rank=8, seed="a")
    root = tmp_path / "models"
    with HubThread() as hub:
        commit = hub.state.add_repo("vllm-fleet-test/tiny-lora", adapter, branch="main")
        spec = spec_for(root, hub.url, name="tiny-lora", repo_id="vllm-fleet-test/tiny-lora")
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        res = out["models"]["tiny-lora"]
        assert res["status"] == "fetched" and res["revision"] == commit
        final = root / "vllm-fleet-test" / "tiny-lora" / commit
        manifest = json.loads((final / ".vllm-fleet-manifest.json").read_text())
        files = {f["path"]: f for f in manifest["files"]}
        assert {"adapter_config.json", "adapter_model.safetensors"} <= set(files)
        assert files["adapter_model.safetensors"]["sha256"]
        assert json.loads((final / "adapter_config.json").read_text())["r"] == 8
        assert (root / "vllm-fleet-test" / "tiny-lora" / "refs" / "main").read_text().strip() == commit


def test_check_mode_reports_without_fetching(python, model, tmp_path):
    with HubThread() as hub:
        hub.state.add_repo(REPO, model)
        rc, out, err = run_fetch(python, spec_for(tmp_path / "m", hub.url), tmp_path, extra=("--check",))
        assert rc == 0, err
        assert out["changed"] is True and out["models"]["tiny"]["status"] == "would_fetch"
        assert hub.bytes(REPO) == 0 and not (tmp_path / "m").exists()


def test_two_writers_at_once_download_once(python, model, tmp_path):
    root = tmp_path / "shared"
    with HubThread() as hub:
        hub.state.add_repo(REPO, model)
        # about 16 s per shard: the second writer surely arrives while the first holds the lock
        hub.state.throttle_bps = 32 << 10
        spec_file = write_spec(tmp_path / "spec.json", spec_for(root, hub.url))
        env = {**os.environ, "HOME": str(tmp_path)}

        def start() -> subprocess.Popen:
            return subprocess.Popen(
                fetch_cmd(python, "fetch", spec_file),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )

        first = start()
        next_staging(root, deadline=time.monotonic() + 60)  # the first writer is downloading
        procs = [first, start()]
        outs = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
        results = [json.loads(o[0])["models"]["tiny"] for o in outs]
        assert [r["status"] for r in results] == ["fetched", "present"]
        assert results[1]["waited_seconds"] > 0
        assert results[0]["path"] == results[1]["path"]
        assert hub.bytes(REPO) == model_size(model), "one download for two writers"


def test_killed_download_resumes_without_refetching_finished_files(python, model, tmp_path):
    root = tmp_path / "shared"
    with HubThread() as hub:
        hub.state.add_repo(REPO, model)
        hub.state.throttle_bps = 1 << 20
        spec = spec_for(root, hub.url)
        spec["download_workers"] = 1
        spec_file = write_spec(tmp_path / "spec.json", spec)
        proc = subprocess.Popen(
            fetch_cmd(python, "fetch", spec_file),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        staging = next_staging(root, deadline=time.monotonic() + 30)
        shards = sorted(p.name for p in model.glob("*.safetensors"))
        deadline = time.monotonic() + 60
        while not (staging / shards[0]).is_file():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lock = root / "vllm-fleet-test" / "tiny" / ".vllm-fleet-writer.lock"
        assert lock.exists(), "a crashed writer leaves its lock behind"
        done_before = {n for n in shards if (staging / n).is_file()}
        assert done_before and done_before != set(shards)

        hub.state.throttle_bps = 0
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        assert out["models"]["tiny"]["status"] == "fetched"
        per_file = hub.file_bytes(REPO)
        size = {p.name: p.stat().st_size for p in model.glob("*.safetensors")}
        for name in done_before:
            assert per_file[name] == size[name], f"{name} finished before the kill and was fetched again"
        assert not lock.exists()


def next_staging(root: Path, deadline: float) -> Path:
    while time.monotonic() < deadline:
        found = list(root.glob("*/*/.staging-*"))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no staging folder appeared")


def test_corrupted_shard_is_detected_and_refetched(python, model, tmp_path):
    shard = sorted(p.name for p in model.glob("*.safetensors"))[1]
    with HubThread() as hub:
        hub.state.add_repo(REPO, model)
        hub.state.corrupt[(REPO, shard)] = 1  # the first copy served is damaged, same size
        rc, out, err = run_fetch(python, spec_for(tmp_path / "m", hub.url), tmp_path)
        assert rc == 0, err
        res = out["models"]["tiny"]
        assert res["refetched"] == [shard]
        assert hub.stats()["gets"][REPO][shard] == 2
        final = Path(res["path"])
        assert (final / shard).read_bytes() == (model / shard).read_bytes()


def test_corruption_that_persists_fails_clearly(python, model, tmp_path):
    shard = sorted(p.name for p in model.glob("*.safetensors"))[0]
    with HubThread() as hub:
        hub.state.add_repo(REPO, model)
        hub.state.corrupt[(REPO, shard)] = 10
        rc, out, _ = run_fetch(python, spec_for(tmp_path / "m", hub.url), tmp_path)
        assert rc == 1
        failure = out["failed"]["tiny"]
        assert failure["code"] == "verify_failed" and shard in failure["message"]
        assert not list((tmp_path / "m").glob("*/*/[0-9a-f]*")), "nothing unverified published"


@pytest.fixture
def verified_copy(python, model, tmp_path):
    """A hub with revision main verified on the storage; yields (hub, spec, final dir, fingerprint)."""
    with HubThread() as hub:
        hub.state.add_repo(REPO, model)
        spec = spec_for(tmp_path / "m", hub.url)
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        final = Path(out["models"]["tiny"]["path"])
        yield hub, spec, final, tree_fingerprint(final.parent)


def _failed(python, spec, tmp_path, env=None) -> dict:
    rc, out, err = run_fetch(python, spec, tmp_path, env=env)
    assert rc == 1, err
    return out["failed"]["tiny"]


def test_unknown_revision_fails_clearly_and_keeps_old_copy(python, verified_copy, tmp_path):
    hub, spec, final, before = verified_copy
    spec["models"][0]["revision"] = "v9-does-not-exist"
    failure = _failed(python, spec, tmp_path)
    assert failure["code"] == "unknown_revision"
    assert "v9-does-not-exist" in failure["message"] and "model_weights_models" in failure["fix"]
    assert tree_fingerprint(final.parent) == before


def test_modelscope_unknown_revision(python, model, tmp_path):
    with HubThread() as hub:
        hub.state.add_repo(REPO, model, branch="master")
        spec = spec_for(tmp_path / "m", hub.url, source="modelscope", revision="v9")
        failure = _failed(python, spec, tmp_path)
        assert failure["code"] == "unknown_revision" and "master" in failure["message"]


def test_gated_repo(python, model, tmp_path):
    gated = "vllm-fleet-test/gated"
    with HubThread() as hub:
        hub.state.add_repo(gated, model, gated_tokens={"hf_good"})
        spec = spec_for(tmp_path / "m", hub.url, repo_id=gated)
        failure = _failed(python, spec, tmp_path)
        assert failure["code"] == "gated_no_token" and "model_weights_hf_token" in failure["fix"]
        failure = _failed(python, spec, tmp_path, env={"VLLM_FLEET_HF_TOKEN": "hf_wrong"})
        assert failure["code"] == "gated_denied"
        assert hub.bytes(gated) == 0
        rc, out, err = run_fetch(python, spec, tmp_path, env={"VLLM_FLEET_HF_TOKEN": "hf_good"})
        assert rc == 0, err
        assert "hf_good" not in json.dumps(out) and "hf_good" not in err


def test_gated_new_revision_without_token_keeps_old_copy(python, verified_copy, model, tmp_path):
    hub, spec, final, before = verified_copy
    hub.state.add_repo(REPO, make_model(tmp_path / "v2", shards=1, seed="v2"), gated_tokens=set())
    failure = _failed(python, spec, tmp_path)
    assert failure["code"] == "gated_no_token"
    assert tree_fingerprint(final.parent) == before


def test_gguf_only_repo_is_refused_and_old_copy_kept(python, verified_copy, tmp_path):
    hub, spec, final, before = verified_copy
    hub.state.add_repo(REPO, make_model(tmp_path / "gguf", gguf_only=True))
    failure = _failed(python, spec, tmp_path)
    assert failure["code"] == "gguf_only" and ".gguf" in failure["message"]
    assert tree_fingerprint(final.parent) == before
    assert hub.bytes(REPO) == model_size(final) - (final / ".vllm-fleet-manifest.json").stat().st_size


def test_unknown_repository(python, tmp_path):
    with HubThread() as hub:
        failure = _failed(python, spec_for(tmp_path / "m", hub.url, repo_id="nobody/nothing"), tmp_path)
        assert failure["code"] == "repo_not_found" and "repo_id" in failure["fix"]


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("needs root to mount a small tmpfs")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_fails_before_downloading_weights_and_keeps_old_copy(python, small_disk, tmp_path):
    small = make_model(tmp_path / "small", shards=1, shard_bytes=256 * 1024)
    big = make_model(tmp_path / "big", shards=3, shard_bytes=2 << 20, seed="big")
    with HubThread() as hub:
        hub.state.add_repo(REPO, small)
        spec = spec_for(small_disk, hub.url)
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        final = Path(out["models"]["tiny"]["path"])
        before = tree_fingerprint(final)
        hub.state.add_repo(REPO, big)
        served = hub.bytes(REPO)
        failure = _failed(python, spec, tmp_path)
        assert failure["code"] == "disk_full"
        assert "free" in failure["message"] and "model_weights_disk_margin_gb" in failure["fix"]
        assert tree_fingerprint(final) == before
        weights_served = sum(v for k, v in hub.file_bytes(REPO).items() if k.endswith(".safetensors"))
        assert weights_served == (small / "model-00001-of-00001.safetensors").stat().st_size, (
            "no weight bytes of the new revision were transferred"
        )
        assert hub.bytes(REPO) - served < 64 * 1024, "only metadata files before the disk check"


def test_storage_filled_during_the_download_fails_clearly_and_publishes_nothing(python, small_disk, tmp_path):
    """The space check passes, then another job fills the storage mid-download: a clear disk_full, the old
    revision untouched and still the one its ref names, and once space is freed the re-run resumes."""
    small = make_model(tmp_path / "small", shards=1, shard_bytes=256 * 1024)
    big = make_model(tmp_path / "big", shards=3, shard_bytes=768 * 1024, seed="big")
    with HubThread() as hub:
        hub.state.add_repo(REPO, small)
        spec = spec_for(small_disk, hub.url)
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        old = Path(out["models"]["tiny"]["path"])
        before = tree_fingerprint(old)
        ref = small_disk / "vllm-fleet-test" / "tiny" / "refs" / "main"
        ref_before = ref.read_text()
        new_commit = hub.state.add_repo(REPO, big)
        hub.state.throttle_bps = 1 << 20
        spec["download_workers"] = 1
        proc = subprocess.Popen(
            fetch_cmd(python, "fetch", write_spec(tmp_path / "spec.json", spec)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        staging = next_staging(small_disk, deadline=time.monotonic() + 30)
        deadline = time.monotonic() + 30
        while not list(staging.glob("*.safetensors")) and not list(staging.rglob("*.incomplete")):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        filler = small_disk / "filler"
        with filler.open("wb") as fh, contextlib.suppress(OSError):
            while True:  # what another job does to the shared storage
                fh.write(b"\0" * 65536)
                fh.flush()
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 1 and stdout, stderr[-3000:]
        failure = json.loads(stdout)["failed"]["tiny"]
        assert failure["code"] == "disk_full", failure
        assert "filled up while" in failure["message"] and "Nothing was published" in failure["message"]
        assert "re-run" in failure["fix"]
        assert "Traceback" not in stderr
        assert tree_fingerprint(old) == before and ref.read_text() == ref_before
        assert not (small_disk / "vllm-fleet-test" / "tiny" / new_commit).exists()

        filler.unlink()
        hub.state.throttle_bps = 0
        rc, out, err = run_fetch(python, spec, tmp_path)
        assert rc == 0, err
        assert out["models"]["tiny"]["status"] == "fetched" and ref.read_text() != ref_before


def test_local_source_and_readers_wait(python, model, tmp_path):
    root = tmp_path / "m"
    spec = {
        "root": str(root),
        "disk_margin_bytes": 0,
        "wait_poll_seconds": 0.1,
        "models": [{"name": "tiny", "source": "local", "path": str(model), "repo_id": "local/tiny"}],
    }
    spec_file = write_spec(tmp_path / "spec.json", spec)
    reader = subprocess.Popen(
        [sys.executable, str(FETCH), "wait", "--spec", str(spec_file), "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    assert reader.poll() is None, "the reader waits for the writer"
    rc, out, err = run_fetch(python, spec, tmp_path)
    assert rc == 0, err
    res = out["models"]["tiny"]
    assert res["status"] == "fetched" and res["revision_kind"] == "listing-digest"
    stdout, stderr = reader.communicate(timeout=30)
    assert reader.returncode == 0, stderr
    seen = json.loads(stdout)["models"]["tiny"]
    assert seen["path"] == res["path"] and seen["config"]["model_type"] == "llama"
    rc, out, _ = run_fetch(python, spec, tmp_path)
    assert out["changed"] is False


def test_reader_times_out_with_a_clear_message(tmp_path):
    spec_file = write_spec(
        tmp_path / "spec.json",
        {
            "root": str(tmp_path),
            "wait_poll_seconds": 0.1,
            "models": [{"name": "x", "repo_id": "o/x", "revision": "main"}],
        },
    )
    proc = subprocess.run(
        [sys.executable, str(FETCH), "wait", "--spec", str(spec_file), "--timeout", "0.3"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    failure = json.loads(proc.stdout)["failed"]["x"]
    assert failure["code"] == "wait_timeout" and "model_weights_root" in failure["fix"]
