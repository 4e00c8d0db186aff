"""Quantities that absorb another engine's model (issue 54, item 3): `air_damping`, the particles' linear
velocity damping (Blender's air), and `particle_radius`, the contact's thickness (another engine's collision
distance). Each against its closed form, and each gradient against float64 finite differences
(`gradsim-jax gradcheck`)."""

import json

import numpy as np

from gradsim_jax.cli import main
from gradsim_jax.scenefile import load_scene
from gradsim_jax.sysid.simulated import simulate_vertices

from cli_scenes import write_scene

#: A 2 x 2 cloth lying flat 0.3 m over the ground, unpinned.
FLAT = """
[scene]
grid = [2, 2]
cell = [0.1, 0.1]
pos = [-0.1, 0.3, -0.1]
rot = [0.7071068, 0.7071068, 0.0, 0.0]
ground = {ground}
particle_radius = 0.02

[material]
mass = 0.01
air_damping = 2.0
contact_ke = 2000.0
contact_kd = 2.0

[camera]
distance = 1.2
elevation = 30.0

[render]
width = 16
height = 16

[simulation]
fps = 30.0
substeps = 20
frames = {frames}

[fit]
free = ["air_damping", "particle_radius"]
"""


def test_air_damping_falls_as_its_recursion_says(tmp_path):
    """A free fall damped by c: the integrator's v_{k+1} = v_k + dt (g - c v_k), x_{k+1} = x_k + dt v_{k+1}."""
    spec = load_scene(write_scene(tmp_path, FLAT.format(ground="false", frames=6)))
    exp = spec.experiment()
    x = simulate_vertices(exp, spec.initial_theta(exp))
    dt, c, g = 1.0 / 30.0 / 20, 2.0, -9.81
    y, v, heights = 0.3, 0.0, [0.3]
    for step in range(6 * 20):
        v = v + dt * (g - c * v)
        y = y + dt * v
        if (step + 1) % 20 == 0:
            heights.append(y)
    # float32 positions of ~0.3 m after 120 steps: a few ulps a step.
    np.testing.assert_allclose(x[:, :, 1], np.repeat(np.array(heights)[:, None], 9, axis=1), atol=2e-6)
    free_fall = 0.3 + 0.5 * g * 0.2 ** 2
    assert x[-1, 0, 1] > free_fall + 0.01  # the air held it back by centimetres


def test_particle_radius_sets_the_rest_height(tmp_path):
    """On the ground, particles rest at ground + radius, less the penalty's sag m g / ke (5e-5 m here)."""
    heights = {}
    for radius in (0.02, 0.05):
        text = FLAT.format(ground="true", frames=45).replace("particle_radius = 0.02", f"particle_radius = {radius}")
        text = text.replace("pos = [-0.1, 0.3, -0.1]", f"pos = [-0.1, {radius + 0.01}, -0.1]")
        spec = load_scene(write_scene(tmp_path, text))
        exp = spec.experiment()
        heights[radius] = float(simulate_vertices(exp, spec.initial_theta(exp))[-1, :, 1].mean())
    for radius, height in heights.items():
        assert abs(height - (radius - 0.01 * 9.81 / 2000.0)) < 5e-4, (radius, height)


def test_their_gradients_agree_with_float64_finite_differences(tmp_path):
    scene = write_scene(tmp_path, FLAT.format(ground="true", frames=8).replace(
        "pos = [-0.1, 0.3, -0.1]", "pos = [-0.1, 0.06, -0.1]"))
    assert main(["render", str(scene), "--out", str(tmp_path / "target")]) == 0
    out = tmp_path / "check"
    assert main(["gradcheck", str(scene), "--target", str(tmp_path / "target"), "--perturb", "0.2", "--seed", "1",
                 "--out", str(out), "--no-float32"]) == 0
    report = json.loads((out / "gradcheck.json").read_text())
    assert report["ok"], report
