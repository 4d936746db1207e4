"""Stand-in for get-pip.py, which ansible-test downloads from a host this machine cannot reach.

ansible-test runs it in each empty sanity venv with pip's install arguments: pip comes from Python's own
ensurepip, then the pinned packages ansible-test asks for come from the package index.
"""

import ensurepip
import os
import subprocess
import sys

# ansible-test passes pip no environment of its own; ensurepip's pip trusts only its bundled CAs
SYSTEM_CAS = "/etc/ssl/certs/ca-certificates.crt"
env = dict(os.environ)
if "PIP_CERT" not in env and os.path.exists(SYSTEM_CAS):
    env["PIP_CERT"] = SYSTEM_CAS

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
ensurepip.bootstrap()
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args], env=env))
