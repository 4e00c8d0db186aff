"""Smoke in scene files (issue 38): a [smoke] table builds the smoke branch of the scene's trees, `gradsim-jax
render` films it as a slab through the [camera], `gradsim-jax fit` recovers its buoyancy and inflow rate, the
registry's smoke quantities take [material] and [initial] keys, and bad values are named."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.render import SmokeLook, density_slab_image, smoke_over
from gradsim_jax.scenefile import SceneFileError, help_text, load_scene
from gradsim_jax.sysid import make_loss, motion, simulate_video

from cli_scenes import write_scene

PLUME = """
[smoke]
cells = [12, 12]
width = 1.0
buoyancy = 1.0
inflow_rate = 2.0
source = [0.5, 0.15, 0.15]
fill_disc = [0.5, 0.15, 0.15]
scale = 0.5

[simulation]
fps = 30
frames = 16

[camera]
eye = [0.2, 0.5, -1.3]
at = [0.0, 0.5, 0.0]

[render]
width = 24
height = 24

[fit]
free = ["smoke_buoyancy", "inflow_rate"]
iterations = 10
polish = 6

[initial]
smoke_buoyancy = 1.3
inflow_rate = 1.6
"""


def test_smoke_scene_builds_the_smoke_branch_and_films_a_slab(tmp_path):
    exp = load_scene(write_scene(tmp_path, PLUME)).experiment()
    assert exp.topology.smoke.shape == (12, 12) and exp.topology.smoke.spacing == pytest.approx(1 / 12)
    assert exp.state0.particles.x.shape == (0, 3) and exp.faces.shape == (0, 3)
    assert exp.smoke_look == SmokeLook(corner=(-0.5, 0.0, 0.0), colormap="smoke", scale=0.5)
    assert float(exp.theta["smoke_buoyancy"]) == 1.0 and float(exp.theta["inflow_rate"]) == 2.0
    _, frames = simulate_video(exp, {})
    assert frames.shape == (17, 24, 24, 4)
    # Nothing but smoke: each frame is the slab over the black background, as density_slab_image films it.
    density = np.asarray(jax.jit(lambda th: motion(exp, th)[1])(exp.theta))
    slab = density_slab_image(exp.camera, density, corner=(-0.5, 0.0, 0.0), extent=(1.0, 1.0), scale=0.5)
    np.testing.assert_allclose(frames, slab, rtol=0, atol=1e-6)  # float32 colours in [0, 1], two programs
    assert frames[-1, ..., 3].max() > 0.5 and frames[-1, ..., 3].sum() > frames[0, ..., 3].sum()  # it grew


def test_smoke_in_front_of_a_mesh_is_composited_over_it():
    """`smoke_over`: colour c a + (1 - a) rgb, alpha a + (1 - a) alpha (the slab's premultiplied colour over the
    picture): no smoke leaves the picture; thick smoke hides it."""
    from gradsim_jax.render import camera_from_eye

    cam = camera_from_eye((0.5, 0.5, -2.0), at=(0.5, 0.5, 0.0), width=8, height=8)
    picture = jnp.broadcast_to(jnp.asarray([0.9, 0.1, 0.1, 1.0]), (8, 8, 4))
    look = SmokeLook(corner=(0.0, 0.0, 0.0), colormap="grey", scale=1.0)
    np.testing.assert_array_equal(smoke_over(cam, jnp.zeros((4, 4)), picture, look, (1.0, 1.0)), picture)
    thick = smoke_over(cam, jnp.full((4, 4), 50.0), picture, look, (1.0, 1.0))
    slab = density_slab_image(cam, jnp.full((4, 4), 50.0), extent=(1.0, 1.0), colormap="grey")
    inside = np.asarray(slab[..., 3]) > 0
    assert inside[4, 4] and not inside[0, 0]  # the slab covers the middle of the view, not its corner
    a = np.asarray(slab[..., 3:])
    np.testing.assert_allclose(thick, np.concatenate([slab[..., :3] + (1 - a) * 0.0 + (1 - a) * picture[..., :3],
                                                      a + (1 - a) * 1.0], -1), rtol=0, atol=1e-6)
    np.testing.assert_allclose(thick[4, 4], [1.0, 1.0, 1.0, 1.0], atol=1e-6)  # white, opaque: e^-50


@pytest.mark.slow  # 17 s cold; CI's 10 minutes (sysid/test_sysid_smoke checks the slab's gradient through the camera)
def test_experiment_loss_gradient_through_the_slab_matches_finite_differences(tmp_path, x64):
    text = PLUME.replace("scale = 0.5", "scale = 0.5\ntolerance = 1e-12").replace("frames = 16", "frames = 6")
    exp = load_scene(write_scene(tmp_path, text)).experiment()
    assert exp.dtype == jnp.float64
    _, target = simulate_video(exp, {})
    loss = jax.jit(make_loss(exp, jnp.asarray(target)))
    theta = {**exp.theta, "smoke_buoyancy": jnp.asarray(1.3), "inflow_rate": jnp.asarray(1.6)}
    grad = jax.grad(loss)(theta)
    for name in ("smoke_buoyancy", "inflow_rate"):
        h = 1e-5
        up = loss({**theta, name: theta[name] + h})
        down = loss({**theta, name: theta[name] - h})
        fd = (float(up) - float(down)) / (2 * h)
        assert float(grad[name]) == pytest.approx(fd, rel=1e-4), name
        assert abs(fd) > 0


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores): an end-to-end run; `make test-all` runs it
def test_render_then_fit_recovers_the_plume(tmp_path, capsys):
    scene = write_scene(tmp_path, PLUME)
    frames_dir = tmp_path / "frames"
    assert main(["render", str(scene), "--out", str(frames_dir)]) == 0
    out = tmp_path / "fit"
    assert main(["fit", str(scene), "--target", str(frames_dir), "--true", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    # Gauss-Newton from 30 % and 20 % off on this renderer's own frames. Their 8-bit PNG colours (rounding up to
    # 1/510 a channel, on a 24 px plume) are the fit's floor: a few 1e-4 of either quantity here, not zero.
    assert report["relative_error"]["smoke_buoyancy"] < 2e-3, report["estimated"]
    assert report["relative_error"]["inflow_rate"] < 2e-3, report["estimated"]
    for name in ("fitted.gif", "comparison.mp4", "loss.png"):
        assert (out / name).is_file()


def test_help_lists_the_smoke_table():
    text = help_text()
    assert "[smoke]" in text and "fill_disc" in text and "smoke_buoyancy" in text


@pytest.mark.parametrize("edit, message", [
    (("cells = [12, 12]", "cells = [1, 12]"), r"\[smoke\] cells must be \[ny, nx\], each at least 2"),
    (("source = [0.5, 0.15, 0.15]", "source = [2.0, 0.15, 0.15]"), r"\[smoke\] source = .* covers no cell"),
    (("scale = 0.5", "scale = 0.5\nwalls = \"open\""), r"\[smoke\] SmokeTopology.walls must be one of"),
    (("buoyancy = 1.0", "buoyancy = nan"), r"\[smoke\] buoyancy must be finite"),
    (("scale = 0.5", "scale = -1.0"), r"\[smoke\] SmokeLook.scale must be a positive density"),
    (("scale = 0.5", "scale = 0.5\nfill_box = [0.5, 0.1, 0.2, 0.3]"), r"fill_box = \[x0, y0, x1, y1\] needs x0 < x1"),
])
def test_bad_smoke_values_are_named(tmp_path, edit, message):
    with pytest.raises(SceneFileError, match=message):
        load_scene(write_scene(tmp_path, PLUME.replace(*edit))).experiment()


def test_a_window_is_refused_for_smoke(tmp_path, capsys):
    scene = write_scene(tmp_path, PLUME.replace("polish = 6", "polish = 6\nwindow = 4"))
    frames_dir = tmp_path / "frames"
    assert main(["render", str(scene), "--out", str(frames_dir)]) == 0
    assert main(["fit", str(scene), "--target", str(frames_dir), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not available for [smoke]" in err and "Traceback" not in err


def test_smoke_quantities_in_material_and_initial(tmp_path):
    text = PLUME.replace("[initial]", "[material]\nsmoke_dissipation = 0.2\nsmoke_vorticity = 0.3\n\n[initial]")
    spec = load_scene(write_scene(tmp_path, text))
    exp = spec.experiment()
    assert float(exp.params.smoke.dissipation) == pytest.approx(0.2) and float(exp.params.smoke.vorticity) == pytest.approx(0.3)
    start = spec.initial_theta(exp)
    assert float(start["smoke_buoyancy"]) == pytest.approx(1.3) and float(start["inflow_rate"]) == pytest.approx(1.6)
    with pytest.raises(SceneFileError, match=r"\[material\] smoke_buoyancy: the scene has no"):
        load_scene(write_scene(tmp_path, """
[scene]
grid = [2, 2]

[material]
smoke_buoyancy = 1.0

[simulation]
frames = 2
[fit]
free = ["mass"]
""")).experiment()


def test_the_smoke_look_and_substeps_are_held_by_kind_and_the_old_keywords_still_work(tmp_path):
    """`Experiment.looks` / `kind_options` hold the smoke's look and solver steps by the kind's name; the old
    keywords `smoke_look=` / `smoke_substeps=` map onto them and read back as before."""
    import dataclasses

    from gradsim_jax.sysid import Experiment, render_frames

    exp = load_scene(write_scene(tmp_path, PLUME)).experiment()
    assert exp.looks == {"smoke": exp.smoke_look} and exp.kind_options == {"smoke_substeps": exp.smoke_substeps}
    bare = dataclasses.replace(exp, looks={}, kind_options={})  # the overlay's default look, simulate's default steps
    assert bare.smoke_look == SmokeLook() and bare.smoke_substeps == 1
    fields = {f.name: getattr(exp, f.name) for f in dataclasses.fields(exp) if f.name not in ("looks", "kind_options")}
    old = Experiment(**fields, smoke_look=SmokeLook(scale=2.0), smoke_substeps=3)
    assert old.looks == {"smoke": SmokeLook(scale=2.0)} and old.kind_options == {"smoke_substeps": 3}
    assert old.smoke_look == SmokeLook(scale=2.0) and old.smoke_substeps == 3
    with pytest.raises(ValueError, match="smoke_substeps must be a whole number >= 1"):
        Experiment(**fields, smoke_substeps=0)
    with pytest.raises(TypeError, match="smoke_look must be a render.SmokeLook"):
        Experiment(**fields, smoke_look="grey")
    with pytest.raises(ValueError, match="the experiment has smoke: give its density"):
        render_frames(exp, jnp.zeros((1, 0, 3)))


def test_a_gradient_check_of_smoke_notes_its_pressure_solve(tmp_path):
    """`diagnostics.problem.gradcheck_notes`: the smoke's word when its gradient check disagrees (its own module's
    `pressure_solve_note`), none for a solve tight enough."""
    from gradsim_jax.diagnostics.problem import gradcheck_notes

    exp = load_scene(write_scene(tmp_path, PLUME)).experiment()
    assert gradcheck_notes(exp) == ["note: the smoke's pressure solve stops at a relative residual of 1e-05; finite "
                                    "differences see that truncation (the gradient is the exact solve's). Check "
                                    "with [smoke] tolerance = 1e-10 (float64 reaches it)"]
    tight = load_scene(write_scene(tmp_path, PLUME.replace("scale = 0.5", "scale = 0.5\ntolerance = 1e-10"),
                                   "tight.toml")).experiment()
    assert gradcheck_notes(tight) == []
