"""Make the project's pure-Python packages importable in unit tests."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("module_utils", "filter_plugins", "tests"):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)
