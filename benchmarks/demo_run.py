"""One `gradsim-jax demo` run as a user runs it (the benchmarks of the demos' recoveries share it)."""

from __future__ import annotations

import json
import os
import platform
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


def update_rows(path: Path, rows: dict, only, run_row, table, table_only: bool = False) -> None:
    """Run the rows named in `only` (comma-separated; None: every row of `rows`) with `run_row(name) -> dict`,
    merge them by name into the JSON results at `path` (so separate runs add up) and print `table(data)`;
    with `table_only`, print the table of the results alone."""
    data = json.loads(path.read_text()) if path.exists() else {"rows": {}}
    if not table_only:
        for name in (only.split(",") if only else rows):
            if name not in rows:
                raise SystemExit(f"--only: unknown row {name!r}; rows: {', '.join(rows)}")
            row = run_row(name)
            print(f"{name}: {row['wall_time_s']:.0f} s", flush=True)
            data["rows"][name] = row
        data.update({"machine": f"{platform.machine()}, {os.cpu_count()} cores, rows one after another",
                     "date": time.strftime("%Y-%m-%d")})
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
        print(f"written {path}")
    print(table(data))
