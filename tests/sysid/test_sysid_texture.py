"""A mesh's texture from pictures (`sysid.renderer_fits.texture`, `scenes.texture`): recovered on a reduced size to the issue's
PSNR on fitted and held-out views, PSNR itself, bad input, and `demo texture` end to end."""

import json

import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.render.camera import look_at_camera
from gradsim_jax.scenes.texture import texture_experiment, textured_blob, true_texture
from gradsim_jax.sysid.renderer_fits.texture import TextureExperiment, check_texture, fit_texture, psnr, render_views


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores): an end-to-end run; `make test-all` runs it
def test_texture_is_recovered_to_35_db_on_fitted_and_held_out_views():
    exp = texture_experiment(size=48, rings=10, segments=20, texture_shape=(16, 16))
    truth = true_texture(exp.texture_shape).astype(np.float32)
    target = np.asarray(render_views(exp, truth))
    result = fit_texture(exp, target, iterations=60, learning_rate=0.2, progress=False)
    fitted = np.asarray(render_views(exp, result.theta["texture"]))
    held = np.asarray(render_views(exp, result.theta["texture"], exp.held_out))
    held_target = np.asarray(render_views(exp, truth, exp.held_out))
    grey = np.asarray(render_views(exp, np.full_like(truth, 0.5)))
    assert psnr(grey, target) < 20.0  # the start is far off
    assert psnr(fitted, target) > 35.0 and psnr(held, held_target) > 35.0
    assert result.loss < 1e-2 * result.history["loss"][0]


def test_psnr_counts_the_covered_pixels_only():
    a = np.zeros((1, 4, 4, 4))
    b = np.zeros((1, 4, 4, 4))
    b[0, :2, :, 3] = 1.0  # the top half covered
    b[0, :2, :, :3] = 0.1  # an RGB error of 0.1 there: MSE 0.01, PSNR 20 dB
    a[0, 2:, :, :3] = 0.7  # the uncovered half differs too, and must not count
    assert psnr(a, b) == pytest.approx(20.0, abs=1e-9)
    with pytest.raises(ValueError, match="covers no pixel"):
        psnr(a, np.zeros_like(a))


def test_the_blob_is_closed_and_its_uv_stays_in_the_unit_square():
    v, f, uv = textured_blob(6, 12)
    edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert np.all(counts == 2)  # every edge shared by two triangles: a closed surface
    assert len(v) - len(edges) // 2 + len(f) == 2  # Euler characteristic of a sphere
    assert uv.shape == (len(f), 3, 2) and uv.min() >= 0.0 and uv.max() <= 1.0


def test_bad_input_names_it():
    exp = texture_experiment(size=16, rings=4, segments=8, texture_shape=(8, 8))
    with pytest.raises(ValueError, match=r"texture must be an RGB image of 8 x 8 texels"):
        check_texture(exp, np.zeros((8, 8, 4)))
    with pytest.raises(ValueError, match=r"finite values in \[0, 1\]"):
        check_texture(exp, np.full((8, 8, 3), np.nan))
    with pytest.raises(ValueError, match=r"8 RGBA images of 16 x 16 pixels"):
        fit_texture(exp, np.zeros((8, 16, 16, 3)), iterations=1, progress=False)
    odd = look_at_camera(4.0, 0.0, 0.0, width=32, height=32)
    with pytest.raises(ValueError, match="same image size"):
        TextureExperiment(exp.vertices, exp.faces, exp.uv, (8, 8), exp.cameras + (odd,))
    with pytest.raises(ValueError, match="uv must be finite"):
        TextureExperiment(exp.vertices, exp.faces, exp.uv[:, :2], (8, 8), exp.cameras)


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end run; `make test-all` runs it
def test_demo_texture_writes_every_output(tmp_path):
    out = tmp_path / "texture"
    assert main(["demo", "texture", "--size", "16", "--texels", "4", "--iterations", "3", "--out", str(out),
                 "--no-progress"]) == 0
    for name in ("target.gif", "initial.gif", "fitted.gif", "comparison.mp4", "loss.png", "texture.png",
                 "report.json", "report.html"):
        assert (out / name).is_file(), name
    report = json.loads((out / "report.json").read_text())
    assert report["psnr_db"]["fitted_views"]["fitted"] > report["psnr_db"]["fitted_views"]["initial"]
    assert report["final_loss"] < report["initial_loss"]
