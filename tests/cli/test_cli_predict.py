"""`gradsim-jax predict`: the fitted scene simulated past the fitted frames and scored against the whole video.

The target is rendered from the scene's [material] (12 frames); a fit's report.json says the first 6 were fitted
and holds the true mass, so the prediction is the target itself (IoU 1, PSNR at its ceiling, no vertex error)
while the frozen last frame and the initial guess are measurably worse on the held-out frames."""

import json

import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.scenefile import load_scene
from gradsim_jax import sysid
from gradsim_jax.sysid.prediction import MAX_PSNR_DB, frame_scores, frozen, psnr, silhouette_iou

from cli_scenes import SMALL_CLOTH, write_scene

SCENE = SMALL_CLOTH + """
[material]
mass = 0.02

[initial]
mass = 0.05

[camera]
distance = 1.6
elevation = 25.0

[render]
width = 24
height = 20

[simulation]
frames = 5
substeps = 8

[fit]
free = ["mass"]
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("predict")
    whole = write_scene(folder, SCENE.replace("frames = 5", "frames = 11"), "whole.toml")
    assert main(["render", str(whole), "--out", str(folder / "target")]) == 0  # 12 RGBA PNGs
    scene = write_scene(folder, SCENE + '\n[target]\nvideo = "target"\n')
    fit = folder / "fit"
    fit.mkdir()
    (fit / "report.json").write_text(json.dumps({"experiment": "scene", "frames": 5, "estimated": {"mass": 0.02},
                                                 "free": ["mass"]}))
    spec = load_scene(whole)
    exp = spec.experiment()
    reference = sysid.simulate_vertices(exp, exp.theta)
    np.save(folder / "reference.npy", reference)
    return folder, scene, fit


def test_predicting_from_the_true_quantities_reproduces_the_held_out_frames(run, capsys):
    folder, scene, fit = run
    assert main(["predict", str(scene), "--fit", str(fit), "--reference", str(folder / "reference.npy")]) == 0
    out = capsys.readouterr().out
    assert "frames 6-11 after the 6 fitted (target: 12 frames)" in out and "open report.html" in out
    report = json.loads((fit / "report.json").read_text())
    pred = report["prediction"]
    assert (pred["fitted_frames"], pred["frames"], pred["target_frames"]) == (6, 12, 12)
    fit_held, frozen_held = pred["summary"]["fit"]["held_out"], pred["summary"]["frozen"]["held_out"]
    # The same renderer and physics: the PNGs round to 1/255, so IoU is exact and the PSNR is at least that of
    # a uniform half-step error, 20 log10(510) = 54 dB.
    assert fit_held["iou"] == 1.0 and fit_held["psnr_mask"] > 54.0
    assert fit_held["vertex_error"] < 1e-6
    # Nothing moving any more is wrong by the cloth's swing; the initial mass (2.5 x) swings the same in a
    # vacuum but the damping is relative to the mass: measurably off.
    assert frozen_held["iou"] < 0.9 and frozen_held["vertex_error"] > 0.01
    assert pred["summary"]["initial"]["held_out"]["vertex_error"] > 0.005
    assert pred["summary"]["frozen"]["fitted"]["vertex_error"] < 1e-6  # the fitted frames are the fit's own
    assert len(pred["per_frame"]["fit"]["iou"]) == 12
    assert pred["summary"]["reference"]["held_out"]["iou"] == 1.0  # the reference is this scene's own motion
    for name in ("prediction.mp4", "prediction.png", "report.html"):
        assert (fit / name).is_file(), name
    page = (fit / "report.html").read_text()
    assert "<h2>Prediction</h2>" in page and "held-out frames" in page


def test_more_frames_than_the_target_and_refusals(run, capsys, tmp_path):
    folder, scene, fit = run
    assert main(["predict", str(scene), "--fit", str(fit), "--frames", "8", "--out", str(tmp_path / "p")]) == 0
    pred = json.loads((tmp_path / "p" / "report.json").read_text())["prediction"]
    assert (pred["frames"], pred["target_frames"]) == (14, 12)
    assert pred["per_frame"]["fit"]["iou"][12:] == [None, None]  # no target to score against
    assert main(["predict", str(scene), "--fit", str(tmp_path)]) == 2
    assert "no report.json: pass --fit the folder a fit wrote" in capsys.readouterr().err
    np.save(tmp_path / "bad.npy", np.zeros((3, 10, 3)))
    assert main(["predict", str(scene), "--fit", str(fit), "--reference", str(tmp_path / "bad.npy"),
                 "--out", str(tmp_path / "q")]) == 2
    assert "must be [frames, V, 3] for the scene's first V <= 9 render vertices" in capsys.readouterr().err


def test_scores_on_small_images():
    a = np.zeros((4, 4)), np.zeros((4, 4))
    assert silhouette_iou(*a) == 1.0  # both empty
    x, y = np.zeros((4, 4)), np.zeros((4, 4))
    x[:2], y[1:3] = 1.0, 1.0
    assert silhouette_iou(x, y) == pytest.approx(4 / 12)
    img = np.zeros((2, 2, 3))
    assert psnr(img, img) == MAX_PSNR_DB
    assert psnr(img, img + 0.1) == pytest.approx(20.0)
    assert np.isnan(psnr(img, img, np.zeros((2, 2), bool)))
    np.testing.assert_array_equal(frozen(np.arange(5), 3, 6), [0, 1, 2, 2, 2, 2])
    video = np.zeros((3, 2, 2, 4))
    s = frame_scores(video, video[:2], alpha_observed=False)
    assert s.iou is None and np.isnan(s.psnr[2]) and s.psnr[0] == MAX_PSNR_DB
