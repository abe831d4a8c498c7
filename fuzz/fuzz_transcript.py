"""Fuzz the `transcript` target (`fuzz.targets`): `python fuzz/fuzz_transcript.py --seconds 600`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.runner import main

if __name__ == "__main__":
    sys.exit(main("transcript", sys.argv[1:]))
