"""The ODE bodies' recoveries (issue 37): each demo run as a user runs it, `gradsim-jax demo NAME` at its
defaults, in its own process, timed from the command to its exit (import, compile and the outputs
included), and its report.json read back.

Rows: `demo pendulum` (length and damping from 50 % off), `demo double-pendulum` (both lengths from
l2 = 1.7), `demo bounce` (launch speed and gravity from 3 m/s and -10 m/s^2) and `demo bounce --estimate
ball_speed,gravity,ball_restitution --iterations 60` (restitution too, from 0.6). Goal (issue 37): every
relative error < 1e-4, every demo under 2 minutes on a 2-core laptop. Also recorded: gradSim's energy check
of the fitted motion (`report.json`'s "energy").

    python benchmarks/bench_ode_recovery.py              # every row, one after another (about 7 min on 2 cores)
    python benchmarks/bench_ode_recovery.py --only bounce

Writes benchmarks/results/ode_recovery.json (rows merged by name, so separate runs add up).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from demo_run import run_demo, update_rows

RESULTS = Path(__file__).resolve().parent / "results"
GOAL_ERROR, GOAL_WALL_S = 1e-4, 120.0

#: row name: the `gradsim-jax demo` arguments
ROWS = {
    "pendulum": ["pendulum"],
    "double-pendulum": ["double-pendulum"],
    "bounce": ["bounce"],
    "bounce+restitution": ["bounce", "--estimate", "ball_speed,gravity,ball_restitution", "--iterations", "60"],
}


def run_row(name: str) -> dict:
    report, wall = run_demo(ROWS[name])
    errors = {k: float(v) for k, v in report["relative_error"].items()}
    return {
        "name": name, "command": "gradsim-jax demo " + " ".join(ROWS[name]),
        "estimated": report["estimated"], "true": report["true"], "initial": report["initial"],
        "relative_error": errors, "largest_relative_error": max(errors.values()),
        "meets_error_goal": bool(max(errors.values()) < GOAL_ERROR),
        "iterations": report["iterations"], "final_loss": report["final_loss"],
        "converged": (report.get("convergence") or {}).get("converged"),
        "energy": report.get("energy"), "fit_wall_time_s": report["wall_time_s"],
        "wall_time_s": wall, "meets_time_goal": bool(wall < GOAL_WALL_S),
    }


def table(data: dict) -> str:
    """The markdown table of the rows in `data` (also `run_all.py`'s)."""
    lines = [f"ODE bodies' demos (`benchmarks/bench_ode_recovery.py`; {data['machine']}, {data['date']}): each "
             "`gradsim-jax demo` at its defaults, wall time from the command to its exit (compilation and outputs "
             "included). Goal: relative error < 1e-4, under 2 minutes. Energy: gradSim's check, the largest "
             "|E(t) - E(0)| of the fitted motion with its dissipation switched off (limit 0.05 J).",
             "",
             "| demo | estimated (relative error) | Adam + LM iterations | energy drift, no dissipation | wall time (s) |",
             "|---|---|---:|---:|---:|"]
    for r in data["rows"].values():
        errs = ", ".join(f"{k} {v:.1e}" for k, v in r["relative_error"].items())
        energy = r.get("energy") or {}
        drift = energy.get("conservative_max_drift")
        drift = "n/a" if drift is None else f"{max(drift):.1e} {energy['unit']}"
        it = r["iterations"]
        lines.append(f"| `{r['command']}` | {errs} | {it['adam']} + {it['levenberg_marquardt']} | {drift} | "
                     f"{r['wall_time_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated rows of {', '.join(ROWS)}")
    parser.add_argument("--table", action="store_true", help="only print the table of the JSON")
    args = parser.parse_args()
    update_rows(RESULTS / "ode_recovery.json", ROWS, args.only, run_row, table, args.table)


if __name__ == "__main__":
    main()
