"""`gradsim-jax demo rigid-*`: options, one end-to-end run writing every output, usage errors."""

import json
import sys

import pytest

from gradsim_jax.cli import main

from cli_scenes import demo_help

OUTPUTS = ("target.gif", "initial.gif", "fitted.gif", "comparison.mp4", "loss.png", "params.png", "report.json", "report.html")


@pytest.mark.parametrize("demo", ["rigid-mass", "rigid-material", "rigid-restitution"])
def test_rigid_demo_help_lists_options(demo, capsys):
    text = demo_help(main, demo, capsys)
    assert ("--estimate" in text) == (demo == "rigid-material")


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end run; `make test-all` runs it
def test_rigid_mass_demo_recovers_the_mass_and_writes_every_output(tmp_path, capsys):
    """The demo scene at 32 px, 14 frames, mass 50 % off at the start: below 1e-3 (the 64 px demo: 3e-7)."""
    out = tmp_path / "rigid-mass"
    rc = main(["demo", "rigid-mass", "--size", "32", "--frames", "14", "--iterations", "25", "--polish", "10",
               "--horizon", "6", "--out", str(out), "--no-progress"])
    assert rc == 0
    for name in OUTPUTS:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == ["body_mass"]
    assert report["command"] == "demo rigid-mass"
    assert report["initial_relative_error"]["body_mass"] == pytest.approx(0.5, rel=1e-5)  # --perturb 0.5 0.5
    for key in ("true", "initial", "estimated", "relative_error", "iterations", "identifiability",
                "total_wall_time_s"):
        assert key in report
    assert report["iterations"]["adam"] == 25
    assert report["relative_error"]["body_mass"] < 1e-3, report["estimated"]
    printed = capsys.readouterr().out
    assert "relative error" in printed and str(out.resolve()) in printed


def test_rigid_material_rejects_a_quantity_of_another_scene(tmp_path, capsys):
    assert main(["demo", "rigid-material", "--estimate", "body_mass,restitution", "--out", str(tmp_path / "m"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "restitution" in err and "body_kf" in err


def test_rigid_material_unknown_quantity_is_a_clear_error(tmp_path, capsys):
    assert main(["demo", "rigid-material", "--estimate", "colour", "--out", str(tmp_path / "m")]) == 2
    assert "unknown quantity 'colour'" in capsys.readouterr().err


def test_rigid_shape_options(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "rigid-shape", "--help"])
    text = capsys.readouterr().out
    for option in ("--size", "--frames", "--iterations", "--smoothness", "--seed", "--resume", "--force",
                   "runs/rigid-shape"):
        assert option in text


def test_rigid_shape_without_its_module_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "gradsim_jax.scenes.rigid_shape", None)  # as if not installed
    assert main(["demo", "rigid-shape", "--out", str(tmp_path / "s")]) == 2
    assert "rigid-shape is not available" in capsys.readouterr().err


def test_rigid_shape_passes_parsed_args(tmp_path, monkeypatch):
    import types

    seen = {}
    module = types.ModuleType("gradsim_jax.scenes.rigid_shape")
    module.run_demo = lambda args: seen.setdefault("args", args) and 0
    monkeypatch.setitem(sys.modules, "gradsim_jax.scenes.rigid_shape", module)
    assert main(["demo", "rigid-shape", "--smoothness", "0.3", "--size", "24", "--out", str(tmp_path / "s")]) == 0
    args = seen["args"]
    assert (args.smoothness, args.size, args.out, args.seed) == (0.3, 24, str(tmp_path / "s"), 0)
