"""`gradsim-jax fit --window W`: truncated backpropagation for long recordings, through the CLI and the
scene file's [fit] window (the windowed loss itself is tested in tests/sysid/test_sysid_windowed.py)."""

import json

import pytest

from gradsim_jax.cli import main

from cli_scenes import SMALL_CLOTH, small_run, write_scene

SCENE = SMALL_CLOTH + """
[material]
mass = 0.01
""" + small_run(8) + """iterations = 4
polish = 3

[initial]
mass = 0.013
"""


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores): an end-to-end run; `make test-all` runs it
def test_windowed_fit_truncates_records_and_polishes(tmp_path, capsys):
    scene = write_scene(tmp_path, SCENE)
    target = tmp_path / "target.gif"
    assert main(["render", str(scene), "--out", str(target)]) == 0
    out = tmp_path / "fit"
    assert main(["fit", str(scene), "--target", str(target), "--window", "3", "--true", "--out", str(out),
                 "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["inputs"]["window"] == 3 and report["inputs"]["horizon"] is None
    assert report["iterations"]["adam"] == 4 and report["iterations"]["levenberg_marquardt"] >= 1
    # from 30 % off, the truncated Levenberg-Marquardt steps land close (a GIF target: 8-bit colours)
    assert report["relative_error"]["mass"] < 0.02, report["estimated"]


def test_window_with_a_growing_horizon_is_refused(tmp_path, capsys):
    scene = write_scene(tmp_path, SCENE.replace("polish = 3", "polish = 3\nwindow = 0"))
    assert main(["fit", str(scene), "--target", str(tmp_path / "t.gif"), "--out", str(tmp_path / "o")]) == 2
    assert "window must be at least 1" in capsys.readouterr().err
    scene = write_scene(tmp_path, SCENE)
    target = tmp_path / "target.gif"
    assert main(["render", str(scene), "--out", str(target)]) == 0
    assert main(["fit", str(scene), "--target", str(target), "--window", "3", "--horizon", "4",
                 "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "window" in err and "horizon" in err and "Traceback" not in err


PENDULUM = """
[pendulum]
lengths = [0.6]
theta = [0.7]
masses = [1.0]
pivot = [0.0, 0.5, 0.0]

[material]
pendulum_length = 0.6

[camera]
distance = 3.0
elevation = 0.0

[render]
width = 16
height = 16

[simulation]
fps = 30.0
frames = 9
substeps = 4

[fit]
free = ["pendulum_length"]
iterations = 2
learning_rate = 0.01
polish = 10
window = 5
shooting = "multiple"

[initial]
pendulum_length = 0.63
"""


@pytest.mark.slow  # ~45 s: the chaotic start-state test and the ODE windowed-loss test cover its parts in CI
def test_pendulum_video_fitted_by_multiple_shooting_from_the_scene_file(tmp_path, capsys):
    """`gradsim-jax fit` on a pendulum's video, with [fit] shooting = "multiple": the start states are read off
    the video, the report records the setting, and Gauss-Newton multiple shooting recovers the length from
    5 % off."""
    scene = write_scene(tmp_path, PENDULUM)
    target = tmp_path / "target.gif"
    assert main(["render", str(scene), "--out", str(target)]) == 0
    out = tmp_path / "fit"
    assert main(["fit", str(scene), "--target", str(target), "--true", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "multiple shooting: 2 windows of 5 frames, start states from video" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["inputs"]["window"] == 5 and report["inputs"]["shooting"] == "multiple"
    assert report["iterations"]["levenberg_marquardt"] >= 1
    # Gauss-Newton on the length and the start states from 5 % off; the target is this renderer's own
    # (8-bit GIF colours: the fit's floor is their rounding, far below 1e-3 of the length)
    assert report["relative_error"]["pendulum_length"] < 1e-3, report["estimated"]


def test_multiple_shooting_needs_a_window(tmp_path, capsys):
    scene = write_scene(tmp_path, PENDULUM.replace("window = 5\n", ""))
    assert main(["fit", str(scene), "--target", str(tmp_path / "t.gif"), "--out", str(tmp_path / "o")]) == 2
    assert 'shooting = "multiple" needs window' in capsys.readouterr().err
    scene = write_scene(tmp_path, PENDULUM.replace('shooting = "multiple"', 'shooting = "single"'))
    assert main(["fit", str(scene), "--target", str(tmp_path / "t.gif"), "--out", str(tmp_path / "o")]) == 2
    assert 'shooting must be "truncated" or "multiple"' in capsys.readouterr().err
