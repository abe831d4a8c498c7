"""Fuzz the `media_extract` target (`fuzz.targets`) for `--seconds N` (default 600)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.runner import main

if __name__ == "__main__":
    sys.exit(main("media_extract", sys.argv[1:]))
