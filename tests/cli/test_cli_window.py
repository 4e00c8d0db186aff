"""`gradsim-jax fit --window W`: truncated backpropagation for long recordings, through the CLI and the
scene file's [fit] window (the windowed loss itself is tested in tests/sysid/test_sysid_windowed.py)."""

import json

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
