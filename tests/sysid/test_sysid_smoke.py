"""Smoke from video (`sysid.smoke`, `scenes.smoke`): the plume's buoyancy and inflow rate recovered on a reduced
grid, the loss's gradient against float64 finite differences, bad input, and both smoke demos end to end."""

import dataclasses
import json

import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.render.camera import look_at_camera
from gradsim_jax.scenes.smoke import letter_mask, plume_experiment, shape_experiment, target_picture
from gradsim_jax.sysid.smoke import (check_target, compared_frames, fit_smoke, simulate_smoke_video, smoke_loss,
                                     smoke_theta)

OUTPUTS = ("target.gif", "initial.gif", "fitted.gif", "comparison.mp4", "loss.png", "params.png", "report.json",
           "report.html")


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_plume_quantities_are_recovered_from_half_off_on_a_reduced_grid():
    exp = plume_experiment(cells=16, frames=18, size=16)
    truth = {"smoke_buoyancy": 1.0, "inflow_rate": 2.0}
    _, target = simulate_smoke_video(exp, truth)
    result = fit_smoke(exp, target, {"smoke_buoyancy": 1.5, "inflow_rate": 1.0}, ["smoke_buoyancy", "inflow_rate"],
                       iterations=20, learning_rate=0.1, polish=10, frame_stride=2, progress=False)
    # Noiseless synthetic video: Gauss-Newton converges to the float32 floor; the goal is 1e-3.
    for name, true in truth.items():
        assert abs(float(result.theta[name]) - true) / true < 1e-3, name
    assert result.history["loss"][-1] < 1e-3 * result.history["loss"][0]
    assert result.lm_iterations >= 1 and "lm" in result.history["stage"]
    assert result.convergence.converged, result.convergence


@pytest.mark.parametrize("through_camera", [False, pytest.param(True, marks=pytest.mark.slow)])  # suite time
def test_loss_gradient_matches_float64_finite_differences(x64, through_camera):
    """Head-on (the grid fills the image) and through an oblique camera (the grid a slab of smoke)."""
    exp = plume_experiment(cells=12, frames=8, size=12, dtype=jnp.float64)
    if through_camera:
        # The camera looks at the origin, near the inflow disc (the slab's corner puts it there), from aside.
        camera = look_at_camera(1.0, 20.0, 25.0, width=14, height=12, view_angle=25.0, dtype=jnp.float64)
        exp = dataclasses.replace(exp, size=None, camera=camera, corner=(-0.5, -0.15, 0.0))
        video = simulate_smoke_video(exp, {})[1]
        assert video.shape[1:] == (12, 14, 4) and 0 < (video[-1, ..., 3] > 0).mean() < 1  # smoke in view
    frames = compared_frames(exp, "all", 2)
    _, video = simulate_smoke_video(exp, {"smoke_buoyancy": 1.2, "inflow_rate": 1.7})
    target = jnp.asarray(check_target(exp, video, frames))

    @jax.jit
    def loss(b, r):
        return smoke_loss(exp, {**smoke_theta(exp), "smoke_buoyancy": b, "inflow_rate": r}, target, frames)

    b, r = 1.0, 2.0
    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))(b, r)
    h = 1e-5  # central differences: truncation ~h^2 |f'''|, rounding ~1e-16 / h: both << 1e-6 relative
    # The CG projection stops at 1e-5 relative residual; its iterate moves with the parameters smoothly
    # as long as the iteration count does not change, which these small steps keep.
    fd = ((loss(b + h, r) - loss(b - h, r)) / (2 * h), (loss(b, r + h) - loss(b, r - h)) / (2 * h))
    for g, f in zip(grad, fd):
        assert abs(float(g) - float(f)) <= 1e-4 * abs(float(f)) + 1e-12


def test_bad_input_names_the_field():
    exp = plume_experiment(cells=8, frames=3, size=8)
    with pytest.raises(ValueError, match="smoke_buoyancy is not finite"):
        smoke_theta(exp, {"smoke_buoyancy": float("nan")})
    with pytest.raises(ValueError, match="inflow_rate must be >= 0"):
        smoke_theta(exp, {"inflow_rate": -1.0})
    with pytest.raises(ValueError, match="unknown smoke quantity colour"):
        smoke_theta(exp, {"colour": 1.0})
    with pytest.raises(ValueError, match="smoke_velocity must have shape"):
        smoke_theta(exp, {"smoke_velocity": np.zeros((8, 8))})
    with pytest.raises(ValueError, match=r"RGBA frames of 8 x 8 pixels"):
        check_target(exp, np.zeros((4, 9, 8, 4)), compared_frames(exp))
    with pytest.raises(ValueError, match="the target video has 5 frames"):
        check_target(exp, np.zeros((5, 8, 8, 4)), compared_frames(exp))
    with pytest.raises(ValueError, match="at least 8 cells"):
        plume_experiment(cells=4)


def test_letter_mask_keeps_the_hole_of_an_o():
    mask = letter_mask("O", (64, 64))
    assert mask[35, 32] == 0.0  # the centre of the O (height 0.6 centred at 0.55)
    assert mask[35, 20:45].max() == 1.0 and 0.05 < mask.mean() < 0.4


@pytest.mark.slow  # its fit is test_plume_quantities_are_recovered_...; make test-all runs the command end to end
def test_demo_smoke_buoyancy_writes_every_output(tmp_path, capsys):
    out = tmp_path / "plume"
    rc = main(["demo", "smoke-buoyancy", "--cells", "12", "--frames", "10", "--size", "12", "--iterations", "3",
               "--polish", "2", "--out", str(out), "--no-progress"])
    assert rc == 0
    for name in OUTPUTS:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    report = json.loads((out / "report.json").read_text())
    assert set(report["quantities"]) == {"smoke_buoyancy", "inflow_rate"}
    assert report["quantities"]["smoke_buoyancy"]["initial"] == pytest.approx(1.5)
    assert report["final_loss"] < report["initial_loss"]
    printed = capsys.readouterr().out
    assert "relative error" in printed and "  converged: " in printed and report["convergence"] is not None


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores): an end-to-end run; `make test-all` runs it
def test_demo_smoke_shape_moves_the_smoke_towards_the_picture(tmp_path):
    out = tmp_path / "shape"
    rc = main(["demo", "smoke-shape", "--cells", "16", "--frames", "12", "--iterations", "6",
               "--learning-rate", "0.1", "--out", str(out), "--no-progress"])
    assert rc == 0
    for name in OUTPUTS + ("frames.png", "target.png"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["final_loss"] < report["initial_loss"]
    assert report["silhouette_iou"]["fitted"] > report["silhouette_iou"]["initial"]


def test_a_picture_without_alpha_is_a_target_and_a_black_one_an_error(tmp_path, capsys):
    exp = shape_experiment(cells=16, frames=2)
    picture = np.zeros((40, 30, 3), np.uint8)  # a phone's picture: RGB, no alpha, another size
    picture[5:20, 10:20] = 255  # a bright block in the upper half
    iio.imwrite(tmp_path / "block.png", picture)
    image, mask = target_picture(exp, "G", tmp_path / "block.png")
    assert image.shape == (16, 16, 4) and mask.shape == (16, 16)
    assert mask[12, 8] == 1.0 and mask[2, 8] == 0.0  # grid rows y up: the block sits in the upper rows
    iio.imwrite(tmp_path / "black.png", np.zeros((8, 8, 3), np.uint8))
    assert main(["demo", "smoke-shape", "--cells", "16", "--frames", "2", "--target", str(tmp_path / "black.png"),
                 "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "gradsim-jax: error: " in (err := capsys.readouterr().err) and "black everywhere" in err
