"""One `gradsim-jax demo` run as a user runs it (the benchmarks of the demos' recoveries share it)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_demo(arguments: list, keep=None) -> tuple[dict, float]:
    """`gradsim-jax demo ARGUMENTS --no-progress` in its own process, into a temporary folder (or the folder
    `keep`, whose outputs stay for the docs' pages): its report.json and the wall time (s) from the command
    to its exit (import, compile and the outputs included)."""
    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(keep) if keep else scratch
        cmd = [sys.executable, "-m", "gradsim_jax.cli", "demo", *arguments, "--no-progress", "--out", tmp]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return json.loads((Path(tmp) / "report.json").read_text()), wall
