"""Footage from another engine (tests/data/blender: Blender's cloth solver, rendered by Cycles; made by
benchmarks/blender/make_cloth_videos.py): the data checks itself, and a scene file that imports Blender's camera
([camera] blender) in Blender's Z-up world ([scene] up = "z") draws Blender's own cloth vertices where Blender's
masks put the cloth."""

import importlib.util
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.scenefile import load_fit_job
from gradsim_jax.sysid.experiment import frames_for
from gradsim_jax.sysid.prediction import silhouette_iou

from cli_scenes import write_scene

DATA = Path(__file__).parents[1] / "data" / "blender"
CASES = ("swing", "drape", "hand", "wind")


def check_case_module():
    spec = importlib.util.spec_from_file_location(
        "check_case", Path(__file__).parents[2] / "benchmarks" / "blender" / "check_case.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scene_text(case: Path) -> str:
    """A scene file of the case as a user writes it from what they know of the scene: the grid, where it lies,
    Blender's camera, the video and its mask."""
    info = json.loads((case / "case.json").read_text())
    grid = info["grid"]
    axis_x, axis_y = np.asarray(grid["axis_x"]), np.asarray(grid["axis_y"])
    rotation = np.c_[axis_x, axis_y, np.cross(axis_x, axis_y)]  # the grid's local axes in the world
    w = np.sqrt(max(1.0 + np.trace(rotation), 1e-12)) / 2.0
    q = [w, (rotation[2, 1] - rotation[1, 2]) / (4 * w), (rotation[0, 2] - rotation[2, 0]) / (4 * w),
         (rotation[1, 0] - rotation[0, 1]) / (4 * w)]
    return f"""
[scene]
up = "z"
grid = [{grid["dim_x"]}, {grid["dim_y"]}]
cell = [{grid["cell_x"]}, {grid["cell_y"]}]
pos = {list(map(float, grid["origin"]))}
rot = {[float(v) for v in q]}
pinned = {info["pinned"]["indices"]}

[camera]
blender = "{case / 'camera.json'}"

[render]
width = 80
height = 60
background_image = "{case / 'background.png'}"

[simulation]
fps = 30.0

[target]
video = "{case / 'frames'}"
mask = "{case / 'masks'}"

[fit]
free = ["stiffness"]
"""


def test_the_blender_cases_check_themselves():
    check = check_case_module()
    for case in CASES:
        out = check.check_case(str(DATA / case))  # AssertionError on a failed check
        assert out, case


@pytest.mark.parametrize("case", CASES)
def test_blender_vertices_drawn_through_the_imported_camera_fill_blenders_masks(tmp_path, case):
    job = load_fit_job(write_scene(tmp_path, scene_text(DATA / case)))
    exp = job.experiment
    reference = np.load(DATA / case / "vertices.npy")
    # Frame 0 of the scene file is Blender's frame 0: the grid's order and pose agree.
    x0 = np.asarray(exp.state0.particles.x)
    np.testing.assert_allclose(x0, reference[0], atol=1e-6)
    drawn = np.asarray(frames_for(exp, jnp.asarray(reference[: exp.frames + 1]), job.initial))
    iou = [silhouette_iou(drawn[k, ..., 3], job.frames[k, ..., 3]) for k in range(exp.frames + 1)]
    # Blender's masks against its own projected triangles: IoU >= 0.975 at 80 x 60 (benchmarks/blender/README.md);
    # our box coverage thresholded at one half draws the same triangles, less the rod's or the ball's occlusion.
    assert min(iou) > 0.93 and np.mean(iou) > 0.96, (case, np.round(iou, 3))


def test_a_hand_moves_the_pinned_vertices_along_blenders_path(tmp_path):
    """[scene] pin_key_times / pin_key_offsets: Blender's hook carried the top row along a keyframed path; given
    per frame, our pinned vertices follow it to float32 rounding, and the free ones hang from them."""
    case = DATA / "hand"
    info = json.loads((case / "case.json").read_text())
    offsets = np.asarray(info["pinned"]["offset_per_frame"])[:20]
    times = np.arange(len(offsets)) / 30.0
    text = scene_text(case).replace(
        "[camera]", f"pin_key_times = {times.tolist()}\npin_key_offsets = {offsets.reshape(-1).tolist()}\n\n"
                    "[material]\nmass = 0.3\ntri_ke = 2.0e4\ntri_ka = 2.0e4\ntri_kd = 20.0\n\n[camera]")
    text = text.replace("[simulation]\nfps = 30.0", "[simulation]\nfps = 30.0\nsubsteps = 32")
    job = load_fit_job(write_scene(tmp_path, text))
    from gradsim_jax import sysid

    x = sysid.simulate_vertices(job.experiment, job.initial)
    reference = np.load(case / "vertices.npy")
    pins = info["pinned"]["indices"]
    np.testing.assert_allclose(x[:, pins], reference[: len(x), pins], atol=2e-5)
    assert np.abs(x[-1, pins] - x[0, pins]).max() > 0.1  # the hand moved them by a decimetre
    free = np.setdiff1d(np.arange(x.shape[1]), pins)
    assert np.linalg.norm(x[-1, free] - reference[len(x) - 1, free], axis=-1).mean() < 0.05  # roughly Blender's


def test_the_how_to_shows_the_example_scene_file_as_it_is():
    """docs/howto/real-cloth.md prints examples/blender_cloth/swing.toml without its comments: the same lines."""
    root = Path(__file__).parents[2]
    page = (root / "docs" / "howto" / "real-cloth.md").read_text()
    block = page.split("# examples/blender_cloth/swing.toml, its comments left out\n", 1)[1].split("```", 1)[0]
    text = (root / "examples" / "blender_cloth" / "swing.toml").read_text()
    file_lines = [line.split("#", 1)[0].rstrip() for line in text.splitlines()]
    assert [line for line in block.splitlines() if line] == [line for line in file_lines if line]


@pytest.mark.parametrize("case", ("swing", "hand"))
def test_blenders_settings_restated_follow_blenders_cloth(tmp_path, case):
    """`physics.blender_cloth` restates the case's Blender settings in SI (springs on every edge, air damping,
    the effective gravity, quality as substeps); stepped by the implicit integrator as Blender steps its cloth,
    the scene follows Blender's own vertices to a few tenths of a millimetre, where the semi-implicit step of
    the same springs at 200 substeps is several times further off (Blender's backward Euler damps what ours does not).
    The hand's pins move; there the match is 0.7 % of the cloth's size after 20 frames, as a standalone replica of
    Blender's solver (scripts in the issue's notes) also reaches: something of how Blender moves pinned vertices
    inside a frame is not reproduced."""
    from gradsim_jax import sysid
    from gradsim_jax.geometry import cloth_grid, mesh_edges
    from gradsim_jax.physics import blender_cloth

    info = json.loads((DATA / case / "case.json").read_text())
    settings = info["blender_cloth"]["settings"]
    grid = cloth_grid(16, 16, 0.05, 0.05)
    edges = mesh_edges(grid.triangles)
    mean_edge = float(np.linalg.norm(grid.x[edges[:, 0]] - grid.x[edges[:, 1]], axis=1).mean())
    values = blender_cloth(info["fps"], mean_edge, mass=settings["mass"], tension=settings["tension_stiffness"],
                           tension_damping=settings["tension_damping"], air_damping=settings["air_damping"],
                           quality=settings["quality"], scene_gravity=-info["gravity"]["scene_gravity"][2])
    assert abs(values["gravity"] - 9.81) < 0.01 and values["substeps"] == 5
    text = scene_text(DATA / case)
    if case == "hand":
        offsets = np.asarray(info["pinned"]["offset_per_frame"])
        times = np.arange(len(offsets)) / 30.0
        text = text.replace("[camera]", f"pin_key_times = {times.tolist()}\n"
                                        f"pin_key_offsets = {offsets.reshape(-1).tolist()}\n\n[camera]")
    material = (f"[material]\nmass = {values['mass']}\ntri_ke = 0.0\ntri_ka = 0.0\ntri_kd = 0.0\n"
                f"spring_ke = {values['spring_ke']}\nspring_kd = {values['spring_kd']}\n"
                f"air_damping = {values['air_damping']}\ngravity = [0.0, 0.0, {-values['gravity']}]\n\n")
    text = text.replace('free = ["stiffness"]', 'free = ["spring_stiffness"]')  # the membrane is off
    reference = np.load(DATA / case / "vertices.npy")
    errors = {}
    for integrator, substeps in (("implicit", values["substeps"]), ("semi_implicit", 200)):
        scene = text.replace("[camera]", material + "[camera]").replace(
            "[simulation]\nfps = 30.0", f"[simulation]\nfps = 30.0\nsubsteps = {substeps}\nintegrator = "
                                        f"\"{integrator}\"\nframes = {len(reference) - 1}")
        job = load_fit_job(write_scene(tmp_path, scene))
        x = sysid.simulate_vertices(job.experiment, job.initial)[:, :289]
        errors[integrator] = np.linalg.norm(x - reference, axis=-1).mean(-1) / 0.8
    assert errors["implicit"].max() < (2e-3 if case == "swing" else 1e-2), np.round(errors["implicit"] * 100, 3)
    ratio = 5.0 if case == "swing" else 1.5
    assert errors["semi_implicit"][-5:].mean() > ratio * errors["implicit"][-5:].mean(), (
        errors["semi_implicit"][-5:].mean(), errors["implicit"][-5:].mean())


def test_the_drape_in_blenders_model_follows_blenders_until_it_turns_chaotic():
    """examples/blender_cloth/drape_blender.toml (Blender's settings restated, its collision response and angular
    bending) follows Blender's drape through the cloth's landing on the ball (frame 8): within 0.2 % of its size
    over frames 0-10 (0.02 % at frame 12 in float32). From frame 13 rounding decides which way it slides off
    (benchmarks/bench_drape_contact.py), so later frames are not compared."""
    from gradsim_jax.scenefile import load_scene

    root = Path(__file__).resolve().parents[2]
    exp = load_scene(root / "examples" / "blender_cloth" / "drape_blender.toml").experiment(native_size=(120, 160))
    reference = np.load(DATA / "drape" / "vertices.npy")[:11]
    traj = gs.simulate(exp.topology, exp.params, exp.state0, frame_dt=1.0 / 30.0, frames=10, substeps=5,
                       integrator=exp.integrator)
    x = np.asarray(traj.particles.x)[:, :289]
    error = np.linalg.norm(x - reference, axis=-1).mean(-1) / 0.8
    assert error.max() < 2e-3, np.round(error * 100, 3)
    assert x[-1, :, 2].min() < 0.45  # it has landed on the ball (top at 0.4 m)
