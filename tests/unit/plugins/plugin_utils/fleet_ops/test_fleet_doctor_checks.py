"""Doctor: probe parsers and every check, table-driven, on real nvidia-smi captures where GPUs matter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import doctor_probe as probe
from ansible_collections.vllm_fleet.vllm_fleet.plugins.module_utils import nvidia_host, nvidia_smi
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils import fleet_planner
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_ops import doctor

ROOT = Path(__file__).resolve().parents[5]
SMI = ROOT / "tests" / "data" / "nvidia-smi"
GIB = 1024**3
MIB = 1024**2


def facts(profile: str) -> dict:
    """nvidia_gpu facts of a captured profile, as the nvidia_gpu_facts module builds them."""
    spec = json.loads((SMI / profile / "profile.json").read_text())
    if spec.get("failure"):
        out = (SMI / profile / spec["failure"]["output"]).read_text()
        return nvidia_smi.facts_from_results({"query": (spec["failure"]["exit_code"], out, "")})
    results = {"query": (0, (SMI / profile / spec["outputs"]["-q"]).read_text(), "")}
    if "topo -m" in spec["outputs"]:
        results["topo"] = (0, (SMI / profile / spec["outputs"]["topo -m"]).read_text(), "")
    return nvidia_smi.facts_from_results(results)


def ecc(profile: str) -> list:
    spec = json.loads((SMI / profile / "profile.json").read_text())
    return probe.parse_ecc((SMI / profile / spec["outputs"]["-q"]).read_text())


def planner(config, gpu_facts, options, inputs):
    gpu = fleet_planner.gpu_spec_from_facts(gpu_facts, nodes=inputs["nodes"], gpus=inputs["gpus"])
    return fleet_planner.plan(config, gpu, options=options, safetensors_index=inputs["safetensors_index"])


def settings(**kw):
    return {**doctor.DEFAULT_SETTINGS, **kw}


def rec(**kw):
    base = {"host": "h1", "gpu_node": True, "probe": {}, "served": [], "stored": []}
    base.update(kw)
    return base


def statuses(results):
    return [(r["check"], r["status"]) for r in results]


# --- probe parsers ---------------------------------------------------------------------------

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0
   1: 0100007F:2336 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4343 1 0
   2: 0100007F:2336 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0
"""
TCP6 = """  sl  local_address                         remote_address                        st inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 0:0 00:0 0 0 0 5151 1
   1: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A 0:0 00:0 0 0 0 5252 1
"""


def test_parse_proc_net_tcp_keeps_listeners_only():
    assert probe.parse_proc_net_tcp(TCP) == [
        {"address": "0.0.0.0", "port": 8000, "inode": 4242},
        {"address": "127.0.0.1", "port": 9014, "inode": 4343},
    ]
    assert probe.parse_proc_net_tcp(TCP6) == [
        {"address": "::", "port": 8080, "inode": 5151},
        {"address": "127.0.0.1", "port": 80, "inode": 5252},
    ]


def test_parse_meminfo():
    text = "MemTotal:       24665400 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n"
    assert probe.parse_meminfo(text) == {
        "mem_total_bytes": 24665400 * 1024,
        "mem_available_bytes": 20000000 * 1024,
    }


@pytest.mark.parametrize(
    ("profile", "gpus", "current", "uncorrectable", "remap_pending", "retired_pending"),
    [
        ("h200x1", 1, "Enabled", 0, False, None),
        ("rtx4090x8", 8, "Disabled", None, False, None),
        ("v100x8", 8, "Enabled", 0, None, False),  # Volta: Double Bit totals, page retirement
        ("a100x8", 8, None, 0, False, None),  # this capture has no ECC Mode section
    ],
)
def test_parse_ecc_on_captures(profile, gpus, current, uncorrectable, remap_pending, retired_pending):
    parsed = ecc(profile)
    assert len(parsed) == gpus
    first = parsed[0]
    assert (first["ecc_current"], first["volatile_uncorrectable"]) == (current, uncorrectable)
    assert (first["remap_pending"], first["retired_pending"]) == (remap_pending, retired_pending)


def test_parse_ecc_counts_uncorrectable_errors():
    text = (SMI / "h200x1" / "smi_q.txt").read_text()
    broken = text.replace(
        "DRAM Uncorrectable                         : 0", "DRAM Uncorrectable                         : 3", 1
    )
    broken = broken.replace(
        "Pending                                        : Enabled",
        "Pending                                        : Disabled",
        1,
    )
    (gpu,) = probe.parse_ecc(broken)
    assert gpu["volatile_uncorrectable"] == 3
    assert (gpu["ecc_current"], gpu["ecc_pending"]) == ("Enabled", "Disabled")


def test_parse_time_outputs():
    assert probe.parse_key_values("NTP=yes\nNTPSynchronized=no\nTimezone=UTC\n")["NTPSynchronized"] == "no"
    tracking = (
        "Reference ID    : C0A80001 (ntp.example)\nStratum         : 3\n"
        "System time     : 0.000123456 seconds slow of NTP time\nLeap status     : Normal\n"
    )
    assert probe.parse_chronyc_tracking(tracking) == {
        "leap_status": "Normal",
        "reference": "C0A80001 (ntp.example)",
        "offset_s": -0.000123456,
    }


@pytest.mark.parametrize(
    ("args", "port"),
    [
        (["vllm", "serve", "/m", "--port", "8001"], 8001),
        (["vllm", "serve", "/m", "--port=9000"], 9000),
        (["vllm", "serve", "/m"], 8000),
    ],
)
def test_port_from_args(args, port):
    assert probe.port_from_args(args) == port


INSPECT = {
    "Id": "0123456789abcdef",
    "Name": "/vllm-llama",
    "Image": "sha256:abc",
    "State": {"Running": True},
    "Config": {
        "Image": "vllm/vllm-openai:v0.32.0",
        "Entrypoint": ["vllm", "serve"],
        "Cmd": ["/srv/m", "--port", "8001"],
        "Labels": {"io.vllm-fleet.role": "vllm_server"},
    },
    "HostConfig": {"IpcMode": "private", "ShmSize": 67108864, "NetworkMode": "host"},
}


@pytest.mark.parametrize(
    ("change", "is_vllm"),
    [
        ({}, True),
        (
            {
                "Config": {
                    "Image": "x",
                    "Entrypoint": None,
                    "Cmd": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                    "Labels": {},
                }
            },
            True,
        ),
        (
            {
                "Config": {
                    "Image": "vllm-fleet/debian-systemd:x",
                    "Cmd": ["/lib/systemd/systemd"],
                    "Labels": {},
                }
            },
            False,
        ),
        (
            {"Config": {"Image": "nginx", "Cmd": ["nginx"], "Labels": {"io.vllm-fleet.role": "gateway"}}},
            False,
        ),
    ],
)
def test_container_summary_and_vllm_detection(change, is_vllm):
    summary = probe.container_summary({**INSPECT, **change})
    assert probe.looks_like_vllm(summary) is is_vllm
    if not change:
        assert summary == {
            "id": "0123456789ab",
            "name": "vllm-llama",
            "image": "vllm/vllm-openai:v0.32.0",
            "image_id": "sha256:abc",
            "labels": {"io.vllm-fleet.role": "vllm_server"},
            "running": True,
            "ipc_mode": "private",
            "shm_size": 67108864,
            "network_mode": "host",
            "args": ["vllm", "serve", "/srv/m", "--port", "8001"],
            "port": 8001,
        }


# --- disk and RAM ----------------------------------------------------------------------------


def disk_rec(free_gib, dirs, stored=None, served=None, sizes=None):
    return rec(
        storage_root="/srv/models",
        stored=stored if stored is not None else [{"name": "a", "repo_id": "o/a", "revision": "r"}],
        served=served or [],
        probe={
            "disks": {
                "/srv/models": {"path": "/srv/models", "mount": "/srv", "free_bytes": int(free_gib * GIB)}
            },
            "model_dirs": dirs,
        },
    ), settings(model_sizes=sizes or {})


@pytest.mark.parametrize(
    ("free", "dirs", "sizes", "status", "needle"),
    [
        (
            100,
            {"a": {"index_total_size": 50 * GIB}},
            None,
            "pass",
            "needs 1.2 x model size - present = 60.0 GiB",
        ),
        (59, {"a": {"index_total_size": 50 * GIB}}, None, "fail", "a 50.0 GiB (safetensors index)"),
        (
            10,
            {"a": {"index_total_size": 50 * GIB, "bytes_present": 50 * GIB}},
            None,
            "pass",
            "50.0 GiB present",
        ),
        (
            10,
            {"a": {"weights_bytes": 9 * GIB, "bytes_present": 9 * GIB}},
            None,
            "pass",
            "(weight files on disk",
        ),
        (10, {"a": {"weights_bytes": 9 * GIB}}, None, "fail", "needs 1.2 x model size - present = 10.8 GiB"),
        (10, {}, {"a": 20 * GIB}, "fail", "a 20.0 GiB (declared)"),
        (10, {}, None, "skip", "size of a unknown"),
    ],
)
def test_check_disk(free, dirs, sizes, status, needle):
    record, sets = disk_rec(free, dirs, sizes=sizes)
    (result,) = doctor.check_disk(record, sets)
    assert result["status"] == status
    assert needle in result["detail"]
    if status == "fail":
        assert result["fix"].startswith("free ") and "model_weights_root" in result["fix"]
    if status == "skip":
        assert "fleet_doctor_model_sizes: {a: BYTES}" in result["fix"]


def test_check_disk_adds_served_models_not_stored_on_the_host():
    record, sets = disk_rec(
        100,
        {"a": {"index_total_size": GIB}, "b": {"index_total_size": 2 * GIB}},
        served=[{"name": "a", "path": "/x"}, {"name": "b", "path": "/y"}],
    )
    (result,) = doctor.check_disk(record, sets)
    assert "a 1.0 GiB" in result["detail"] and "b 2.0 GiB" in result["detail"]
    assert "needs 1.2 x model size - present = 3.6 GiB" in result["detail"]


@pytest.mark.parametrize(
    ("ram_gib", "overrides", "status", "needle"),
    [
        (64, {}, "pass", "needs 1.5 x 30.0 GiB weights = 45.0 GiB"),
        (40, {}, "fail", "40.0 GiB RAM"),
        (40, {"pipeline_parallel_size": 2}, "pass", "1/2 of 30.0 GiB, PP 2"),
    ],
)
def test_check_ram(ram_gib, overrides, status, needle):
    record = rec(
        served=[{"name": "m", "path": "/m", "overrides": overrides}],
        probe={
            "memory": {"mem_total_bytes": ram_gib * GIB},
            "model_dirs": {"m": {"index_total_size": 30 * GIB}},
        },
    )
    (result,) = doctor.check_ram(record, settings(), None)
    assert result["status"] == status and needle in result["detail"]
    if status == "fail":
        assert "vllm_server_models" in result["fix"]


# --- containers and ports ----------------------------------------------------------------------


def container(
    name="v1",
    ipc="private",
    shm=64 * MIB,
    host="h1",
    model="m",
    port=8000,
    labelled=True,
    running=True,
    measured=None,
):
    labels = {"io.vllm-fleet.role": "vllm_server", "io.vllm-fleet.host": host, "io.vllm-fleet.model": model}
    return {
        "name": name,
        "image": "img",
        "labels": labels if labelled else {},
        "running": running,
        "vllm": True,
        "ipc_mode": ipc,
        "shm_size": shm,
        "port": port,
        **({"dev_shm_bytes": measured} if measured is not None else {}),
    }


@pytest.mark.parametrize(
    ("containers", "host_shm", "scope", "expected"),
    [
        ([container(ipc="host")], 32 * GIB, "all", [("pass", "ipc=host")]),
        ([container(ipc="host")], 64 * MIB, "all", [("fail", "host's /dev/shm is only 64 MiB")]),
        ([container(shm=64 * MIB)], GIB, "all", [("fail", "ipc=private and /dev/shm 64 MiB < 1024 MiB")]),
        ([container(shm=None)], GIB, "all", [("fail", "Docker's default 64 MiB")]),
        ([container(shm=2 * GIB)], GIB, "all", [("pass", "/dev/shm 2048 MiB")]),
        ([container(host="other")], GIB, "all", [("pass", "no vLLM container is running")]),
        (
            [container(labelled=False)],
            GIB,
            "labelled",
            [("pass", "no vLLM container of this host (labelled)")],
        ),
        ([container(labelled=False)], GIB, "all", [("fail", "ipc=private")]),
        ([container(running=False)], GIB, "all", [("pass", "no vLLM container")]),
    ],
)
def test_check_shm(containers, host_shm, scope, expected):
    record = rec(
        probe={
            "docker": {"available": True},
            "containers": containers,
            "disks": {"/dev/shm": {"total_bytes": host_shm}},
        }
    )
    results = doctor.check_shm(record, settings(container_scope=scope))
    assert [
        (r["status"], any(n in r["detail"] for n in [e[1]])) for r, e in zip(results, expected, strict=True)
    ] == [(e[0], True) for e in expected]
    for r in results:
        if r["status"] == "fail":
            assert r["fix"]


@pytest.mark.parametrize(
    ("ipc", "measured", "host_shm", "in_container", "status", "detail"),
    [
        # the lab: the GPU node is a container with Docker's 64 MiB /dev/shm; vLLM (ipc=host) gets the
        # engine host's
        ("host", 16 * GIB, 64 * MIB, True, "pass", "16384 MiB"),
        ("host", 64 * MIB, 32 * GIB, False, "fail", "the /dev/shm vLLM sees is only 64 MiB"),
        ("host", None, 64 * MIB, True, "skip", "does not see"),
        ("host", None, 64 * MIB, False, "fail", "the host's /dev/shm is only 64 MiB"),
        ("host", None, 32 * GIB, False, "pass", "32768 MiB"),
        ("private", 2 * GIB, GIB, False, "pass", "/dev/shm 2048 MiB"),
        ("private", 64 * MIB, 32 * GIB, True, "fail", "ipc=private and /dev/shm 64 MiB < 1024 MiB"),
    ],
)
def test_check_shm_judges_the_shm_vllm_gets(ipc, measured, host_shm, in_container, status, detail):
    record = rec(
        probe={
            "docker": {"available": True},
            "containers": [container(ipc=ipc, shm=2 * GIB, measured=measured)],
            "disks": {"/dev/shm": {"total_bytes": host_shm}},
            "time": {"container": in_container},
        }
    )
    [found] = doctor.check_shm(record, settings())
    assert (found["status"], detail in found["detail"]) == (status, True), found
    assert bool(found.get("fix")) == (status == "fail")


def test_check_shm_without_docker_skips_on_gpu_nodes_only():
    assert statuses(
        doctor.check_shm(rec(probe={"docker": {"available": False, "error": "no socket"}}), settings())
    ) == [("shm_ipc", "skip")]
    assert doctor.check_shm(rec(gpu_node=False, probe={"docker": {"available": False}}), settings()) == []


@pytest.mark.parametrize(
    ("listeners", "containers", "extra", "status", "needle"),
    [
        ({}, [], [], "pass", "free"),
        (
            {"8000": [{"processes": [{"pid": 7, "cmdline": "python3 -m http.server 8000"}]}]},
            [],
            [],
            "fail",
            "in use by pid 7 (python3 -m http.server 8000)",
        ),
        ({"8000": [{"processes": []}]}, [container(port=8000)], [], "pass", "its own vLLM container v1"),
        (
            {"8000": [{"processes": []}]},
            [container(port=8000, model="other")],
            [],
            "fail",
            "another PID namespace",
        ),
        (
            {"8000": [{"processes": [{"pid": 9, "cmdline": "/usr/bin/python3 -m vllm serve --port 8000"}]}]},
            [container(port=8000)],
            [],
            "pass",
            "own vLLM container",
        ),
    ],
)
def test_check_ports_for_served_models(listeners, containers, extra, status, needle):
    record = rec(
        served=[{"name": "m", "port": 8000}],
        extra_ports=extra,
        probe={"listeners": listeners, "containers": containers},
    )
    (result,) = doctor.check_ports(record, settings())
    assert result["subject"] == "port 8000 (vllm_server_models[m].port)"
    assert result["status"] == status and needle in result["detail"]
    if status == "fail":
        assert result["fix"].endswith("set vllm_server_models[m].port to a free port")


@pytest.mark.parametrize(
    ("cmdline", "status"),
    [("nginx: master process /usr/sbin/nginx", "pass"), ("python3 -m http.server", "fail")],
)
def test_check_ports_for_the_gateway(cmdline, status):
    targets = doctor.targets({"host": "gw", "gateway": {"http_port": 8080, "https_port": 8443, "tls": True}})
    assert targets["probe_args"]["ports"] == [8080, 8443]
    record = rec(
        host="gw",
        gpu_node=False,
        extra_ports=targets["extra_ports"],
        probe={"listeners": {"8080": [{"processes": [{"pid": 1, "cmdline": cmdline}]}]}},
    )
    results = doctor.check_ports(record, settings())
    assert [(r["subject"], r["status"]) for r in results] == [
        ("port 8080 (gateway_http_port)", status),
        ("port 8443 (gateway_https_port)", "pass"),
    ]


# --- Hugging Face access ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "token", "expected", "needle"),
    [
        (200, True, "pass", "HTTP 200 with the token"),
        (302, False, "pass", "without a token"),
        (401, False, "fail", "model_weights_hf_token"),
        (403, True, "fail", "accept the model's licence at https://huggingface.co/org/m"),
        (404, True, "fail", "check repo_id and revision of model m"),
        (-1, True, "warn", "fleet_doctor_hub_offline: true"),
        (500, True, "warn", "could not ask the hub"),
    ],
)
def test_hub_results(status, token, expected, needle):
    check = {
        "name": "m",
        "repo_id": "org/m",
        "revision": "main",
        "endpoint": "",
        "status": status,
        "token_set": token,
        "host": "storage1",
        "msg": "",
    }
    (result,) = doctor.hub_results([check], offline=False, models_declared=1)
    assert result["status"] == expected
    assert needle in result["detail"] + result["fix"]
    assert result["subject"] == "org/m@main"


@pytest.mark.parametrize(
    ("offline", "declared", "needle"),
    [
        (True, 2, "offline: fleet_doctor_hub_offline is true"),
        (False, 2, "no Hugging Face model"),
        (False, 0, "no model declared"),
    ],
)
def test_hub_results_skips_with_a_reason(offline, declared, needle):
    (result,) = doctor.hub_results([], offline, declared)
    assert result["status"] == "skip" and needle in result["detail"]


def test_hub_requests_only_for_hub_models_of_writers():
    records = [
        doctor.targets(
            {
                "host": "s1",
                "writer": True,
                "weights_models": [
                    {"name": "a", "source": "huggingface", "repo_id": "o/a", "revision": "r"},
                    {"name": "b", "source": "modelscope", "repo_id": "o/b", "revision": "r"},
                    {"name": "c", "repo_id": "o/c", "revision": "main", "endpoint": "http://mirror/"},
                ],
            }
        ),
        doctor.targets({"host": "g1", "gpu_node": True, "weights_models": [{"name": "a", "repo_id": "o/a"}]}),
    ]
    assert [(r["host"], r["url"]) for r in doctor.hub_requests(records, "")] == [
        ("s1", "https://huggingface.co/o/a/resolve/r/config.json"),
        ("s1", "http://mirror/o/c/resolve/main/config.json"),
    ]


# --- CUDA and the container toolkit ------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "image_cuda", "status", "needle"),
    [
        ("h200x1", "12.8", "pass", "runs CUDA <= 13.0; image needs CUDA 12.8"),
        ("rtx4090x8", "12.8", "fail", 'nvidia_driver_branch: "570"'),
        ("h100x8", "12.9", "fail", "an image built for CUDA 12.7 or older"),
        ("h100x8", None, "skip", "not on the host yet"),
    ],
)
def test_check_cuda(profile, image_cuda, status, needle):
    record = rec(
        gpu=facts(profile),
        image="vllm/vllm-openai:v0.32.0",
        probe={
            "images": {
                "vllm/vllm-openai:v0.32.0": {"present": image_cuda is not None, "cuda_version": image_cuda}
            },
            "toolkit": {"runtime": True},
        },
    )
    cuda, toolkit = doctor.check_cuda(record, settings(), nvidia_host.cuda_check)
    assert cuda["status"] == status
    assert needle in cuda["detail"] + cuda["fix"]
    assert toolkit["status"] == "pass"


@pytest.mark.parametrize(
    ("toolkit", "gpu_requests", "status"),
    [
        ({"cli_version": "1.17.8"}, True, "pass"),
        ({"cdi_specs": ["/etc/cdi/nvidia.yaml"]}, True, "pass"),
        ({}, True, "fail"),
        ({}, False, "skip"),
    ],
)
def test_check_container_toolkit(toolkit, gpu_requests, status):
    record = rec(
        gpu=facts("h200x1"),
        gpu_requests=gpu_requests,
        image_cuda="12.8",
        image="i",
        probe={"toolkit": toolkit},
    )
    result = doctor.check_cuda(record, settings(), nvidia_host.cuda_check)[-1]
    assert (result["check"], result["status"]) == ("container_toolkit", status)
    if status == "fail":
        assert "playbooks/hosts.yml" in result["fix"]


# --- GPU state: NVML, persistence, ECC, MIG -------------------------------------------------------


def test_nvml_mismatch_is_one_failure_with_the_reboot_fix():
    results = doctor.check_gpu_state(rec(gpu=facts("nvml-mismatch")), settings())
    assert statuses(results) == [("nvml_mismatch", "fail")]
    assert "reboot the host" in results[0]["fix"] and "hold" in results[0]["fix"]


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("h200x1", {"persistence_mode": "pass", "ecc": "pass", "mig": "pass"}),
        ("rtx4090x8", {"persistence_mode": "pass", "ecc": "pass", "mig": "pass"}),  # GeForce: no ECC, fine
        ("l40sx1", {"persistence_mode": "warn"}),
        ("a100x8", {"persistence_mode": "warn"}),
        ("h100x1-mig", {"mig": "fail"}),
    ],
)
def test_gpu_state_on_captures(profile, expected):
    spec = json.loads((SMI / profile / "profile.json").read_text())
    record = rec(gpu=facts(profile), probe={"ecc": ecc(profile) if "-q" in spec["outputs"] else []})
    got = dict(statuses(doctor.check_gpu_state(record, settings())))
    assert got["nvml_mismatch"] == "pass"
    for check, status in expected.items():
        assert got[check] == status, (check, got)


@pytest.mark.parametrize(
    ("change", "status", "needle"),
    [
        ({"volatile_uncorrectable": 2}, "fail", "2 uncorrectable ECC errors since boot"),
        ({"remap_failure": True}, "fail", "row remapping failed"),
        ({"remap_pending": True}, "warn", "wait for a GPU reset"),
        ({"ecc_pending": "Disabled"}, "warn", "ECC Enabled now, Disabled after reboot"),
        ({"ecc_current": "Disabled", "ecc_pending": "Disabled"}, "warn", "ECC disabled"),
    ],
)
def test_ecc_problems(change, status, needle):
    entry = {**ecc("h200x1")[0], **change}
    results = doctor.check_gpu_state(rec(gpu=facts("h200x1"), probe={"ecc": [entry]}), settings())
    (result,) = [r for r in results if r["check"] == "ecc"]
    assert result["status"] == status and needle in result["detail"] and result["fix"]


def test_mig_allowed_is_a_warning():
    results = doctor.check_gpu_state(
        rec(gpu=facts("h100x1-mig"), probe={"ecc": []}), settings(allow_mig=True)
    )
    assert dict(statuses(results))["mig"] == "warn"


# --- topology against the planned TP -----------------------------------------------------------------

LLAMA70 = json.loads(
    (ROOT / "tests/data/model-configs/meta-llama__Meta-Llama-3.1-70B/config.json").read_text()
)


@pytest.mark.parametrize(
    ("profile", "model", "status", "needle"),
    [
        (
            "h100x8",
            {"name": "l", "overrides": {"tensor_parallel_size": 4}},
            "pass",
            "TP 4 (planned now) on GPUs 0,1,2,3 over nvswitch",
        ),
        (
            "rtx4090x8",
            {"name": "l", "overrides": {"tensor_parallel_size": 4}},
            "warn",
            "GeForce cards have no peer-to-peer",
        ),
        (
            "rtx4090x8",
            {"name": "l", "overrides": {"tensor_parallel_size": 2}, "gpus": [6, 7]},
            "warn",
            "GPUs 6,7",
        ),
        ("h100nvlx2", {"name": "l", "overrides": {"tensor_parallel_size": 2}}, "skip", "links are unknown"),
        (
            "h200x1",
            {"name": "l", "overrides": {"max_model_len": 4096, "quantization": "fp8"}},
            "pass",
            "TP 1",
        ),
    ],
)
def test_check_topology(profile, model, status, needle):
    record = rec(
        gpu=facts(profile),
        served=[model],
        probe={"model_dirs": {"l": {"config": LLAMA70}}},
        vllm_version="0.32.0",
    )
    (result,) = doctor.check_topology(record, planner)
    assert result["status"] == status, result
    assert needle in result["detail"]


def test_check_topology_uses_the_deployed_plan_first_and_skips_without_config():
    deployed = {"models": {"l": {"current": {"plan": {"tensor_parallel_size": 2}}}}}
    record = rec(gpu=facts("rtx4090x8"), served=[{"name": "l"}], deployed=deployed)
    (result,) = doctor.check_topology(record, planner)
    assert result["status"] == "warn" and "TP 2 (deployed plan)" in result["detail"]
    (skipped,) = doctor.check_topology(rec(gpu=facts("rtx4090x8"), served=[{"name": "l"}]), planner)
    assert skipped["status"] == "skip" and "playbooks/weights.yml" in skipped["fix"]


# --- time ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clock", "received", "expected", "detail"),
    [
        (
            {"epoch": 1000.4, "controller_time": 1000.0, "container": True},
            1001.0,
            [("clock_skew", "pass"), ("time_sync", "skip")],
            "+0.0 s against the control node (the probe's round trip: 1.0 s)",
        ),
        (
            {"epoch": 1009.0, "controller_time": 1000.0, "ntp_synchronized": True},
            1002.0,
            [("clock_skew", "fail"), ("time_sync", "pass")],
            "+7.0 s",
        ),
        (
            {"epoch": 990.0, "controller_time": 1000.0, "ntp_synchronized": True},
            1002.0,
            [("clock_skew", "fail"), ("time_sync", "pass")],
            "-10.0 s",
        ),
        (
            {"epoch": 1003.0, "controller_time": 1000.0, "ntp_synchronized": False},
            None,
            [("clock_skew", "pass"), ("time_sync", "fail")],
            "+3.0 s",
        ),
        ({"chrony": {"leap_status": "Not synchronised"}}, None, [("time_sync", "fail")], ""),
        (
            {"chrony": {"leap_status": "Normal", "offset_s": 0.001}},
            None,
            [("time_sync", "pass")],
            "offset +1.0 ms",
        ),
        ({}, None, [("time_sync", "warn")], ""),
    ],
)
def test_check_time(clock, received, expected, detail):
    results = doctor.check_time(rec(probe={"time": clock}, received_time=received), settings())
    assert statuses(results) == expected
    assert detail in results[0]["detail"]


# --- the whole run ------------------------------------------------------------------------------------


def test_evaluate_reports_hosts_without_a_probe_and_uses_host_settings():
    disk_record, _ = disk_rec(59, {"a": {"index_total_size": 50 * GIB}})
    disk_record["settings"] = {"disk_factor": 1.1}  # the host's own threshold wins
    results = doctor.evaluate([rec(host="gone", probe=None), disk_record], settings(), [], None, None)
    assert ("probe", "fail") in statuses(results)
    (disk,) = [r for r in results if r["check"] == "disk_space"]
    assert disk["status"] == "pass" and "needs 1.1 x" in disk["detail"]


def test_render_puts_the_fix_under_failures_and_warnings_only():
    results = [
        doctor.result("port_free", "h1", "port 1", "fail", "in use", "move it"),
        doctor.result("ecc", "h1", "gpus", "pass", "ok", "never shown"),
        doctor.result("mig", "h1", "gpus", "warn", "pending", "reset"),
        doctor.result("time_sync", "h0", "NTP", "skip", "container", "not shown either"),
    ]
    lines = doctor.render(results).splitlines()
    assert lines[0].split() == ["STATUS", "HOST", "CHECK", "SUBJECT", "DETAIL"]
    body = [line.split()[0] for line in lines[2:-2]]
    assert body == ["SKIP", "FAIL", "fix:", "WARN", "fix:", "PASS"]  # by host, then failures first
    assert "never shown" not in "\n".join(lines) and "not shown either" not in "\n".join(lines)
    assert lines[-1] == "1 failed, 1 warnings, 1 passed, 1 skipped"
    assert doctor.summary(results) == {"pass": 1, "warn": 1, "fail": 1, "skip": 1, "ok": False}


def test_targets_of_a_writer_gpu_node():
    t = doctor.targets(
        {
            "host": "g1",
            "gpu_node": True,
            "writer": True,
            "storage_root": "/srv/models/",
            "served": [{"name": "s", "path": "/srv/models/o/s/r", "port": 8001}],
            "weights_models": [
                {"name": "w", "repo_id": "o/w", "revision": "abc"},
                {"name": "l", "source": "local"},
            ],
            "extra_ports": [{"port": 9100, "owner": "node_exporter_port"}],
            "image": "img",
        }
    )
    assert t["probe_args"] == {
        "paths": ["/srv/models"],
        "model_dirs": [
            {"name": "w", "base": "/srv/models/o/w", "revision": "abc"},
            {"name": "l", "base": "/srv/models/local/l", "revision": "main"},
            {"name": "s", "path": "/srv/models/o/s/r"},
        ],
        "ports": [8001, 9100],
        "images": ["img"],
        "nvidia_smi": True,
    }
    gateway = doctor.targets({"host": "gw", "served": [{"name": "s", "port": 1}]})
    assert gateway["served"] == [] and gateway["probe_args"]["paths"] == [] and gateway["image"] is None
