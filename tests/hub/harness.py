"""Test helpers around the hub stand-in: an in-process hub, the hub clients' venv, the fetch CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hub.server import HubState, make_server

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "roles" / "model_weights" / "files"
FETCH = FILES / "vllm_fleet_fetch.py"
REQUIREMENTS = FILES / "requirements.txt"
CACHE = Path(os.environ.get("VLLM_FLEET_CACHE", Path.home() / ".cache" / "vllm-fleet"))


def wheelhouse() -> Path:
    """The pinned hub clients as wheels (downloaded once from the package index)."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    out = CACHE / f"weights-wheels-{key}"
    stamp = out / ".complete"
    if not stamp.exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "-d",
                str(out),
                "-r",
                str(REQUIREMENTS),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        stamp.touch()
    return out


def client_python() -> Path:
    """A venv with the same pinned clients as the role installs on the writer host."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    venv = CACHE / f"weights-client-venv-{key}"
    python = venv / "bin" / "python"
    stamp = venv / ".complete"
    if not stamp.exists():
        wheels = wheelhouse()
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-index",
                "--find-links",
                str(wheels),
                "-r",
                str(REQUIREMENTS),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        stamp.touch()
    return python


@dataclass
class Hub:
    state: HubState
    url: str

    def stats(self) -> dict[str, Any]:
        return self.state.stats()

    def bytes(self, repo_id: str) -> int:
        return self.state.stats()["bytes"].get(repo_id, 0)

    def file_bytes(self, repo_id: str) -> dict[str, int]:
        return self.state.stats()["files"].get(repo_id, {})


class HubThread:
    """The hub stand-in on 127.0.0.1:<free port>, served from a thread of the test process."""

    def __enter__(self) -> Hub:
        self.state = HubState()
        self.server = make_server("127.0.0.1", 0, self.state)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return Hub(self.state, f"http://127.0.0.1:{self.server.server_address[1]}")

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def fetch_cmd(python: Path, mode: str, spec_file: Path, *extra: str) -> list[str]:
    return [str(python), str(FETCH), mode, "--spec", str(spec_file), *extra]


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(json.dumps(spec))
    return path


def run_fetch(
    python: Path,
    spec: dict[str, Any],
    tmp: Path,
    mode: str = "fetch",
    env: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
    timeout: float = 120,
) -> tuple[int, dict[str, Any], str]:
    spec_file = write_spec(tmp / f"spec-{os.getpid()}-{threading.get_ident()}.json", spec)
    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HF_", "VLLM_FLEET_HF", "MODELSCOPE"))
    }
    full_env.update(
        {
            "HF_HOME": str(tmp / "hf-home"),
            "MODELSCOPE_CACHE": str(tmp / "ms-cache"),
            "HOME": str(tmp / "home"),
        }
    )
    full_env.update(env or {})
    proc = subprocess.run(
        fetch_cmd(python, mode, spec_file, *extra),
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        out = {}
    return proc.returncode, out, proc.stderr


def tree_fingerprint(directory: Path) -> dict[str, tuple[int, int, str]]:
    """path -> (size, mtime_ns, sha256) of every file under DIRECTORY."""
    result = {}
    for item in sorted(directory.rglob("*")):
        if item.is_file():
            st = item.stat()
            result[item.relative_to(directory).as_posix()] = (
                st.st_size,
                st.st_mtime_ns,
                hashlib.sha256(item.read_bytes()).hexdigest(),
            )
    return result
