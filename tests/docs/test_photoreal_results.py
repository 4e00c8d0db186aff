"""The photoreal figures the README and the benchmarks page print are the ones benchmarks/bench_photoreal.py
recorded (benchmarks/results/photoreal.json), to the digits written."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_photoreal  # noqa: E402

ROWS = json.loads((ROOT / "benchmarks" / "results" / "photoreal.json").read_text())


def test_the_benchmarks_page_holds_the_recorded_table():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    for line in bench_photoreal.table(ROWS)[2:]:
        case = line.split("|")[1].strip()
        rest = line.split("|", 2)[2]
        assert any(row.startswith(f"| {case} (") and row.endswith(rest) for row in page.splitlines()), line


def test_the_readme_figures_are_the_recorded_ones():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("Against Blender 5.0.1"):].split("\n\n", 2)[1]
    rows = [r for r in table.splitlines()[2:]]
    for case, row in zip(("swing", "hand", "drape", "swing2"), rows):
        held = ROWS[case]["summary"]
        iou, bound = held["fit"]["held_out"]["iou"], held["reference"]["held_out"]["iou"]
        error, frozen = (held["fit"]["held_out"]["vertex_error_relative"],
                         held["frozen"]["held_out"]["vertex_error_relative"])
        assert f"{iou:.3f} ({bound:.3f})" in row, (case, row)
        error_text, frozen_text = f"{100 * error:.2f} %", f"{100 * frozen:.1f} %"
        assert error_text in row and frozen_text in row, (case, row, error_text, frozen_text)
        assert f"{ROWS[case]['fit_wall_s']:.0f} s" in row, (case, row)


def test_the_wind_row_and_the_how_tos_wind_figures_are_the_recorded_ones():
    """The wind case (issue 54, a wind field in scene files): its row on the benchmarks page, and the figures the
    how-to quotes for it."""
    row = ROWS["wind"]
    assert any(line.startswith("| wind |") for line in bench_photoreal.table(ROWS))
    summary = row["summary"]["fit"]
    page = (ROOT / "docs" / "howto" / "real-cloth.md").read_text()
    for text in (f"{100 * summary['fitted']['vertex_error_relative']:.2f} %",
                 f"{100 * summary['held_out']['vertex_error_relative']:.2f} %",
                 f"IoU {summary['fitted']['iou']:.3f}", f"IoU {summary['held_out']['iou']:.3f}",
                 f"{100 * row['summary']['initial']['held_out']['vertex_error_relative']:.2f} %",
                 f"{row['estimated']['wind']:.0f} Pa"):
        assert text in page, text
