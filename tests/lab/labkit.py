"""What every lab script here does the same way: run a command, ask a server over HTTP with a key."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from typing import Any


def sh(*args: str, check: bool = True) -> str:
    """A command's stdout; with check, stop the script naming the command and its stderr when it fails."""
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and done.returncode:
        raise SystemExit(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def http(method: str, url: str, key: str = "", body: Any = None, timeout: float = 60) -> tuple[int, str]:
    """(status, text) of one request; 0 and the reason when the server cannot be reached."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()[:300]
    except OSError as exc:
        return 0, str(exc)
