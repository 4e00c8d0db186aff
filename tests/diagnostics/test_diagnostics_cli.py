"""`gradsim-jax gradcheck | horizon | landscape` on a tiny scene file (target rendered from [material])."""

import json

import pytest

from gradsim_jax.cli import main

TINY = """
[scene]
grid = [2, 2]
cell = [0.2, 0.2]
pos = [-0.2, 0.3, 0.0]
fix = ["top"]

[render]
width = 16
height = 16

[simulation]
frames = 4
substeps = 8

[fit]
free = ["mass", "stiffness"]
"""


@pytest.fixture
def scene(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


# The end-to-end commands compile the whole rollout-and-render pipeline (reverse, forward and float32 variants):
# 30-60 s each on a 2-core machine. The library tests of tests/diagnostics cover their logic; the horizon
# command below covers the scene-file path in the default suite.
@pytest.mark.slow
def test_gradcheck_agrees_and_exits_one_when_a_tolerance_is_not_met(scene, tmp_path, capsys):
    out = tmp_path / "gc"
    assert main(["gradcheck", str(scene), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rendered from the scene's [material]" in text and "moved by 0.2" in text and "all gradients agree" in text
    report = json.loads((out / "gradcheck.json").read_text())
    assert report["ok"] and [q["name"] for q in report["quantities"]] == ["mass", "stiffness"]
    for q in report["quantities"]:
        assert q["verdict"] == "ok" and q["ad_error"] < 1e-6 and q["fd_error"] < 1e-4, q
    # The same checks (the compiled programs come from the cache) against an impossible FD tolerance.
    assert main(["gradcheck", str(scene), "--out", str(out), "--fd-rtol", "1e-30", "--no-float32"]) == 1
    assert "GRADIENTS DISAGREE" in capsys.readouterr().out


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores): an end-to-end run; `make test-all` runs it
def test_horizon_writes_table_plot_and_json(tmp_path, capsys):
    scene = tmp_path / "smaller.toml"  # 8 x 8 px, 3 frames: the cheapest scene-file run
    scene.write_text(TINY.replace("16", "8").replace("frames = 4", "frames = 3"))
    out = tmp_path / "hz"
    assert main(["horizon", str(scene), "--out", str(out)]) == 0
    report = json.loads((out / "horizon.json").read_text())
    assert [row["horizon"] for row in report["table"]] == pytest.approx([1 / 60, 2 / 60, 3 / 60])
    assert report["horizon"] is None and report["mode"] == "forward"  # 4 frames of a calm cloth: informative
    assert all(row["relative_difference"] < 0.1 for row in report["table"])
    assert (out / "horizon.png").stat().st_size > 1000 and "stops being informative" in capsys.readouterr().out
    assert report["suggested_window"] is None
    # A tolerance below float32's rounding marks the first horizon (1 frame = `substeps` steps); the suggested
    # fit --window is a third of it in frames, at least 1 (same programs: no new compilation).
    assert main(["horizon", str(scene), "--out", str(out), "--tol", "1e-9"]) == 0
    report = json.loads((out / "horizon.json").read_text())
    assert report["horizon"] == pytest.approx(1 / 60) and report["suggested_window"] == 1
    assert "fit --window 1" in capsys.readouterr().out


@pytest.mark.slow
def test_landscape_one_dimensional(scene, tmp_path, capsys):
    out = tmp_path / "ls"
    assert main(["landscape", str(scene), "--vary", "stiffness", "--points", "3", "--span", "0.4", "--batch", "2",
                 "--out", str(out)]) == 0
    report = json.loads((out / "landscape.json").read_text())
    assert report["axes"]["stiffness"] == pytest.approx([60.0, 100.0, 140.0])
    # The target is the scene's own render: the loss is least (0 up to float32 rounding) at the centre, the truth.
    assert report["minimum"]["stiffness"] == pytest.approx(100.0) and report["loss"][1] < 1e-9
    assert min(report["loss"][0], report["loss"][2]) > 100 * report["loss"][1]
    assert (out / "landscape.png").stat().st_size > 1000


@pytest.mark.parametrize("argv, message", [
    (["landscape", "{scene}", "--vary", "nonsense"], "unknown quantity"),
    (["landscape", "{scene}", "--vary", "mass,stiffness,damping"], "one or two"),
    (["gradcheck", "{missing}"], "missing.toml"),
])
def test_bad_input_is_a_message(scene, tmp_path, capsys, argv, message):
    argv = [a.format(scene=scene, missing=tmp_path / "missing.toml") for a in argv]
    assert main(argv + ["--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err
