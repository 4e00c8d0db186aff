"""The README worked example: render a target from examples/cloth_scene.toml, fit it back with the CLI."""

import json
from pathlib import Path

import pytest

from gradsim_jax.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cloth_scene.toml"
OUTPUTS = ("target.gif", "initial.gif", "fitted.gif", "comparison.mp4", "loss.png", "params.png", "report.json", "report.html")


@pytest.mark.slow  # 27 s cold; CI's 10 minutes (test_fit_from_png_folder runs render then fit)
def test_render_then_fit_example_scene(tmp_path):
    target = tmp_path / "target.gif"
    assert main(["render", str(EXAMPLE), "--out", str(target)]) == 0
    assert target.is_file()
    out = tmp_path / "fit"
    rc = main(["fit", str(EXAMPLE), "--target", str(target), "--true", "--out", str(out), "--no-progress"])
    assert rc == 0
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == ["mass", "stiffness"]
    assert report["initial"] == pytest.approx({"mass": 0.014, "stiffness": 130.0})
    # A GIF target is quantized to 8 bits and a palette, so the recovery is close, not exact.
    for name, err in report["relative_error"].items():
        assert err < 0.01, (name, err)
    # report.html opens in a real browser without errors and its videos and pictures load.
    from browser import body_data, loaded_dom

    dom = loaded_dom(out / "report.html")
    assert body_data(dom, "media") == "ok", body_data(dom, "media")
    assert "Converged" in dom and "stiffness" in dom


@pytest.mark.slow
def test_fit_from_png_folder(tmp_path):
    frames = tmp_path / "frames"
    assert main(["render", str(EXAMPLE), "--out", str(frames)]) == 0
    assert len(list(frames.glob("*.png"))) == 21
    out = tmp_path / "fit"
    rc = main(["fit", str(EXAMPLE), "--target", str(frames), "--loss", "rgba", "--iterations", "1",
               "--polish", "0", "--out", str(out), "--no-progress"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert "true" not in report and report["iterations"]["adam"] == 1
