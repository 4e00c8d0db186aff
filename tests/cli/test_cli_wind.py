"""[wind] in scene files (`scenefile.wind`, `physics.wind`): the section built into the trees as written, its
errors, the quantity `wind` (its gradient against float64 finite differences, `gradsim-jax gradcheck`), and
Blender's wind case (tests/data/blender/wind): its strength converted to a pressure reproduces Blender's motion,
and a short fit from a wrong strength moves towards it."""

import json
from pathlib import Path

import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.scenefile import load_scene
from gradsim_jax.scenefile.schema import SceneFileError, help_text
from gradsim_jax.sysid.simulated import simulate_vertices

from cli_scenes import write_scene
from test_cli_blender import DATA, scene_text

#: A 2 x 2 cloth hanging from its top edge (plane z = 0), blown along +z by a wind that ramps up.
HANGING = """
[scene]
grid = [2, 2]
cell = [0.1, 0.1]
pos = [-0.1, 0.3, 0.0]
fix = ["top"]

[wind]
direction = [0.0, 0.0, 2.0]
strength = {strength}
key_times = [0.0, 0.1]
key_factors = [0.0, 1.0]

[material]
mass = 0.01
tri_ke = 200.0
tri_ka = 200.0
tri_kd = 1.0

[camera]
distance = 1.2
elevation = 20.0
azimuth = 60.0

[render]
width = 16
height = 16

[simulation]
fps = 30.0
substeps = 20
frames = {frames}

[fit]
free = ["wind"]
"""


def test_the_section_builds_as_written(tmp_path):
    spec = load_scene(write_scene(tmp_path, HANGING.format(strength=4.0, frames=3)))
    exp = spec.experiment()
    wind = exp.params.wind
    assert exp.topology.wind
    np.testing.assert_allclose(wind.direction, [0.0, 0.0, 1.0])  # normalized
    assert float(wind.strength) == 4.0 and wind.ease == "smooth"
    np.testing.assert_allclose(wind.key_times, [0.0, 0.1])
    np.testing.assert_allclose(wind.key_factors, [0.0, 1.0])
    assert float(np.asarray(spec.initial_theta(exp)["wind"])) == 4.0
    x = simulate_vertices(exp, spec.initial_theta(exp))
    assert x[-1, :, 2].mean() > 1e-3  # blown along +z
    still = load_scene(write_scene(tmp_path, HANGING.format(strength=0.0, frames=3).replace(
        'free = ["wind"]', 'free = ["stiffness"]')))
    assert np.abs(simulate_vertices(still.experiment(), still.initial_theta(still.experiment()))[..., 2]).max() < 1e-6
    assert "[wind]" in help_text() and "key_factors" in help_text()


@pytest.mark.parametrize("change, match", [
    (("direction = [0.0, 0.0, 2.0]\n", ""), "direction is required"),
    (("direction = [0.0, 0.0, 2.0]", "direction = [0.0, 0.0, 0.0]"), "nonzero"),
    (("strength = 4.0", "strength = -4.0"), "strength must be"),
    (("key_factors = [0.0, 1.0]", "key_factors = [1.0]"), "one factor per key time"),
    (("key_times = [0.0, 0.1]", "key_times = [0.1, 0.0]"), "must increase"),
    (("key_factors = [0.0, 1.0]", 'key_factors = [0.0, 1.0]\nease = "cubic"'), "ease must be one of"),
    (("strength = 4.0\n", ""), "needs strength"),
    (("grid = [2, 2]", "mesh_free = 1"), "mesh_free"),
])
def test_bad_wind_values_are_named(tmp_path, change, match):
    text = HANGING.format(strength=4.0, frames=3).replace(*change)
    with pytest.raises(SceneFileError, match=match):
        load_scene(write_scene(tmp_path, text)).experiment()


def test_wind_without_a_cloth_is_refused(tmp_path):
    text = HANGING.format(strength=4.0, frames=3).split("[material]")[1]
    text = ('[[body]]\nshape = "box"\nhalf_extents = [0.1, 0.1, 0.1]\npos = [0.0, 0.5, 0.0]\n\n[wind]\n'
            'direction = [1.0, 0.0, 0.0]\nstrength = 2.0\n\n[material]' + text.replace('free = ["wind"]',
                                                                                      'free = ["body_mass"]'))
    with pytest.raises(SceneFileError, match="no cloth triangles"):
        load_scene(write_scene(tmp_path, text)).experiment()


def test_free_wind_needs_a_wind(tmp_path):
    text = HANGING.format(strength=4.0, frames=3)
    text = text.split("[wind]")[0] + "[material]" + text.split("[material]")[1]
    with pytest.raises(SceneFileError, match="wind does not apply"):
        load_scene(write_scene(tmp_path, text)).experiment()


def test_the_winds_gradient_agrees_with_float64_finite_differences(tmp_path):
    scene = write_scene(tmp_path, HANGING.format(strength=4.0, frames=6))
    assert main(["render", str(scene), "--out", str(tmp_path / "target")]) == 0
    out = tmp_path / "check"
    assert main(["gradcheck", str(scene), "--target", str(tmp_path / "target"), "--perturb", "0.2", "--seed", "1",
                 "--out", str(out), "--no-float32"]) == 0
    report = json.loads((out / "gradcheck.json").read_text())
    assert report["ok"], report


def blender_wind_text(strength: float, extra: str = "") -> str:
    """The small Blender wind case as a user writes it: the swing's fitted cloth, the wind's facts."""
    case = json.loads((DATA / "wind" / "case.json").read_text())["wind"]
    keys = [k["blender_frame"] for k in case["strength_keyframes"]]
    text = scene_text(DATA / "wind").replace("[camera]", f"""
[wind]
direction = {case["direction"]}
strength = {strength}
key_times = {[(k - 1) / 30.0 for k in keys]}
key_factors = [0.0, 1.0]

[material]
mass = 0.3
tri_ke = 5.0e4
tri_ka = 5.0e4
tri_kd = 10.0
air_damping = 1.0
{extra}
[camera]""")
    return text.replace("[simulation]\nfps = 30.0", "[simulation]\nfps = 30.0\nsubsteps = 32\nframes = 19")


def test_blenders_strength_as_a_pressure_reproduces_blenders_motion(tmp_path):
    """Blender's strength 1500 at 30 fps is 0.02 x 30 x 1500 = 900 Pa (physics.wind): with the swing's fitted
    cloth it follows Blender's cloth to about a centimetre over the 20 small frames; without wind, decimetres."""
    reference = np.load(DATA / "wind" / "vertices.npy")
    errors = {}
    for strength in (900.0, 0.0):
        spec = load_scene(write_scene(tmp_path, blender_wind_text(strength)))
        exp = spec.experiment()
        x = simulate_vertices(exp, spec.initial_theta(exp))
        errors[strength] = np.linalg.norm(x - reference[: len(x)], axis=-1).mean()
    assert errors[900.0] < 0.015 and errors[0.0] > 0.1, errors


def test_a_short_fit_of_the_wind_moves_towards_blenders(tmp_path):
    """Three Adam iterations on frames 0-8 of the small video at 40 x 30 px, from half the strength: it rises."""
    text = blender_wind_text(450.0).replace('free = ["stiffness"]', 'free = ["wind"]')
    text = text.replace("frames = 19", "frames = 8").replace("width = 80\nheight = 60", "width = 40\nheight = 30")
    scene = write_scene(tmp_path, text)
    out = tmp_path / "run"
    assert main(["fit", str(scene), "--out", str(out), "--iterations", "3", "--polish", "0", "--no-progress"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["estimated"]["wind"] > 1.05 * 450.0, report["estimated"]  # Adam: a few % a step
