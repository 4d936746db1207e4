"""Weights scenario: one verified copy on the storage, fetched once, served read-only over NFS."""

import json
import os

import pytest
import testinfra

testinfra_hosts = ["ansible://storage"]

REPO = "vllm-fleet-test/tiny"
MODEL_DIR = f"/srv/models/{REPO}"


def hub_stats():
    hub = testinfra.get_host("ansible://vf-weights-hub?ansible_inventory=" + _inventory())
    return json.loads(hub.check_output("curl -sf http://127.0.0.1:8990/_hub/stats"))


def _inventory():
    return os.environ["MOLECULE_INVENTORY_FILE"]


def gpu_hosts():
    return [
        testinfra.get_host(f"ansible://vf-weights-gpu{i}?ansible_inventory={_inventory()}") for i in (1, 2)
    ]


@pytest.fixture(scope="module")
def commit():
    return hub_stats()["repos"][REPO]["branches"]["main"]


@pytest.fixture(scope="module")
def manifest(host, commit):
    return json.loads(host.file(f"{MODEL_DIR}/{commit}/.vllm-fleet-manifest.json").content_string)


def test_layout_and_ref(host, commit):
    assert host.file(f"{MODEL_DIR}/{commit}").is_directory
    assert host.file(f"{MODEL_DIR}/refs/main").content_string.strip() == commit
    leftovers = host.check_output(
        f"find {MODEL_DIR} -maxdepth 1 \\( -name '.staging-*' -o -name '*.lock' \\)"
    )
    assert leftovers == ""


def test_manifest_lists_every_file_verified(host, commit, manifest):
    assert manifest["revision"] == commit and manifest["revision_kind"] == "commit"
    assert manifest["requested_revision"] == "main" and manifest["endpoint"] == "http://hub:8990"
    stats = hub_stats()
    assert manifest["total_bytes"] == stats["repos"][REPO]["size"][commit]
    for entry in manifest["files"]:
        f = host.file(f"{MODEL_DIR}/{commit}/{entry['path']}")
        assert f.size == entry["size"], entry["path"]
        if entry["sha256"]:
            assert f.sha256sum == entry["sha256"], entry["path"]
    assert sum(1 for e in manifest["files"] if e["path"].endswith(".safetensors")) == 3


def test_fetched_exactly_once_for_three_hosts_and_two_runs(manifest):
    """Converge + idempotence with three hosts: the hub served the model's bytes exactly once."""
    stats = hub_stats()
    assert stats["bytes"][REPO] == manifest["total_bytes"]
    assert all(n == 1 for n in stats["gets"][REPO].values()), stats["gets"][REPO]


def test_ganesha_exports_the_model_store(host):
    assert host.service("nfs-ganesha").is_running
    assert host.service("nfs-ganesha").is_enabled
    assert host.socket("tcp://0.0.0.0:2049").is_listening or host.socket("tcp://:::2049").is_listening
    conf = host.file("/etc/ganesha/ganesha.conf").content_string
    assert 'Path = "/srv/models";' in conf and 'Pseudo = "/models";' in conf


@pytest.mark.parametrize("index", [0, 1])
def test_gpu_nodes_read_verified_files_over_nfs(commit, manifest, index):
    gpu = gpu_hosts()[index]
    listing = gpu.check_output(f"nfs-ls 'nfs://vf-weights-storage/models/{REPO}?version=4'")
    assert commit in listing
    shard = next(e for e in manifest["files"] if e["path"].endswith(".safetensors"))
    digest = gpu.check_output(
        f"nfs-cat 'nfs://vf-weights-storage/models/{REPO}/{commit}/{shard['path']}?version=4' | sha256sum"
    )
    assert digest.split()[0] == shard["sha256"]


def test_export_is_read_only_for_gpu_nodes():
    gpu = gpu_hosts()[0]
    result = gpu.run(
        f"echo x > /tmp/probe && nfs-cp /tmp/probe 'nfs://vf-weights-storage/models/{REPO}/probe?version=4'"
    )
    assert result.rc != 0


@pytest.mark.parametrize("index", [0, 1])
def test_gpu_nodes_have_the_read_only_nfs_mount_configured(index):
    gpu = gpu_hosts()[index]
    fstab = [
        line.split() for line in gpu.file("/etc/fstab").content_string.splitlines() if "/srv/models" in line
    ]
    assert len(fstab) == 1
    src, path, fstype, opts = fstab[0][:4]
    assert (src, path, fstype) == ("vf-weights-storage:/models", "/srv/models", "nfs4")
    assert {"vers=4.2", "hard", "ro", "nconnect=8"} <= set(opts.split(","))


@pytest.mark.parametrize("index", [0, 1])
def test_gpu_nodes_waited_for_the_writer_and_fetched_nothing(index, commit):
    gpu = gpu_hosts()[index]
    assert not gpu.file("/opt/vllm-fleet/weights/venv").exists, "only the writer installs the hub clients"
    assert not gpu.file("/opt/vllm-fleet/weights/tokens.json").exists
    spec = json.loads(gpu.file("/opt/vllm-fleet/weights/spec.json").content_string)
    assert spec["models"][0]["resolved_revision"] == commit


def test_token_file_is_root_only(host):
    f = host.file("/opt/vllm-fleet/weights/tokens.json")
    assert f.mode == 0o600 and f.user == "root"
