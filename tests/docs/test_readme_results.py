"""The README's results table says what was measured (issue 52, item 7): each figure there is the range over
seeds and CPUs that `benchmarks/bench_spread.py` recorded in benchmarks/results/spread/, to the digits written.
The README once kept figures that no longer reproduced (fem-mass 1.2e-4 where every run gave 1.6e-3)."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_spread  # noqa: E402

NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def readme_rows() -> dict[str, str]:
    """The results table's rows: the demo's command (the backticked cell) -> the gradsim-jax cell."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Results"):].split("\n\n|", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in ("|" + table).splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[1].strip("`")] = cells[2]
    return rows


def numbers(cell: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(cell)]


def measured() -> dict[tuple[str, str], list[float]]:
    found = {}
    for data in map(bench_spread.json.loads, map(Path.read_text, sorted(bench_spread.RESULTS.glob("*.json")))):
        for name, runs in data["rows"].items():
            for run in runs.values():
                for figure, value in run["figures"].items():
                    found.setdefault((name, figure), []).append(value)
    return found


def test_every_row_of_the_spread_benchmark_has_results():
    assert {name for name, _ in measured()} == set(bench_spread.ROWS)


@pytest.mark.parametrize("name, figure", sorted(measured()))
def test_readme_shows_the_measured_range(name, figure):
    values = measured()[(name, figure)]
    rows = readme_rows()
    arguments = bench_spread.ROWS[name][0]
    cell = rows.get(" ".join(arguments), rows.get(arguments[0]))
    assert cell is not None, f"no README row for `{' '.join(arguments)}`"
    written = numbers(cell)
    for end in (min(values), max(values)):
        # two significant digits, as the README writes them (and 2,300 for 2,340)
        assert any(abs(w - end) <= 0.05 * abs(end) for w in written), (
            f"`{' '.join(arguments)}` {figure}: measured {min(values):.3g} to {max(values):.3g}, the README says {cell}")
