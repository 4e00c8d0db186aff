"""Scene files say what a user knows (issue 34, item 3): every fittable quantity of the registry has a key in
[material] (its value in the built scene) and in [initial] (the fit's start), generated from the registry;
[[soft_body]] tables take their particles' masses, or a whole cell's mass per particle as Warp's grids do."""

import numpy as np
import pytest

from gradsim_jax.scenefile import MATERIAL_QUANTITIES, SCHEMA, SceneFileError, load_scene
from gradsim_jax.sysid import QUANTITIES
from gradsim_jax.sysid.quantities import default_theta

from cli_scenes import SCENE_TAIL, SMALL_CLOTH, write_scene

TAIL = SCENE_TAIL

BLOCK = """
[[soft_body]]
shape = "box"
size = [0.2, 0.1, 0.1]
cells = [2, 1, 1]
pattern = 5
density = 500.0
k_mu = 4000.0
k_lambda = 6000.0
k_damp = 2.0
pos = [0.4, 0.3, 0.0]
"""

BOX = """
[[body]]
shape = "box"
half_extents = [0.05, 0.05, 0.05]
mass = 0.5
pos = [-0.4, 0.3, 0.0]
"""

PENDULUM = """
[pendulum]
lengths = [0.3, 0.2]
theta = [0.5, -0.2]
masses = [1.0, 2.0]
damping = [0.1, 0.1]
pivot = [0.0, 0.8, 0.0]
"""

COLLIDER = """
[[collider]]
shape = "sphere"
pos = [0.0, -0.5, 0.0]
radius = 0.2
"""

#: A scene every quantity but the balls' applies to: a cloth with bending and aerodynamics, a soft block and a
#: rigid box on the ground, a sphere collider below, and a double pendulum.
EVERYTHING = SMALL_CLOTH.replace('fix = ["left"]', 'fix = ["left"]\nground = true') + """
[material]
bend_ke = 0.01
tri_drag = 0.1
tri_lift = 0.05
""" + BLOCK + BOX + COLLIDER + PENDULUM + TAIL

#: The balls' quantities apply to a scene of [[ball]] tables (one ODE body per scene: not with the pendulum).
BALLS = """
[[ball]]
pos = [0.0, 1.0, 0.0]
velocity = [0.5, 0.2, 0.0]
radius = 0.2
restitution = 0.7
friction = 0.1

[[ball]]
pos = [0.5, 1.5, 0.0]
velocity = [-0.5, 0.0, 0.0]
radius = 0.2
restitution = 0.7
friction = 0.1
""" + TAIL

#: A scene of the smoke's quantities: a [smoke] table.
SMOKE = """
[smoke]
cells = [6, 6]
buoyancy = 1.5
inflow_rate = 0.5
dissipation = 0.1
vorticity = 0.2
source = [0.5, 0.2, 0.2]
""" + TAIL

#: Quantities with no key in scene files, and why: the camera's pose is [camera]'s; the blur of the edges is
#: [fit] blur's; a body's shape offsets are fitted from its template (`demo rigid-shape`), never given;
#: gravity is [material] gravity's (a vector; the quantity is its y component); the smoke's initial velocity
#: field is a whole grid of face values (fitted, as `demo smoke-shape` does, never typed in); the appearance's
#: nuisances (albedo, lights, shadow) are read off the video and [render] ([render] appearance, shadows, ambient,
#: directional, light_direction start them); the contact radius is [scene] particle_radius's; the wind's
#: pressure is [wind] strength's.
WITHOUT_KEYS = {"camera_pose", "blur", "shape", "gravity", "smoke_velocity", "albedo", "ambient", "directional",
                "light_direction", "shadow", "shadow_blur", "particle_radius", "wind"}


def _keyed():
    return [q for q in QUANTITIES.values() if q.name not in WITHOUT_KEYS]


def _other_value(q, own):
    """A value of quantity q unlike the scene's own `own` (what a user might know instead)."""
    own = np.asarray(own, np.float64)
    if q.name == "restitution":
        return 0.3
    if q.name == "air_damping":  # the scenes' own is 0 (none), which a log-space quantity cannot start from
        return 0.8
    if q.name == "velocity":
        return [0.1, -0.2, 0.3]
    if q.name == "density_field":
        return [float(np.log(700.0)), 0.2, 0.0, -0.1]
    if q.file_type == "float[]":
        return (own * np.linspace(1.2, 1.5, own.size)).tolist()
    return float(own.reshape(-1)[0] * 1.37)


def _scene_value(q, theta):
    value = np.asarray(theta[q.name], np.float64)
    return value[0] if q.name == "velocity" else value


def test_every_fittable_quantity_has_a_material_and_an_initial_key():
    for q in _keyed():
        assert q.file_key, q.name
        assert q.file_key in SCHEMA["initial"], q.name
        assert q.file_key in SCHEMA["material"], q.name
        assert SCHEMA["initial"][q.file_key].type == q.file_type
    assert {"fem_mu", "fem_lambda", "fem_damping", "density", "particle_mass"} <= set(SCHEMA["initial"])
    assert {"fem_mu", "body_mass", "restitution", "density_field"} <= set(MATERIAL_QUANTITIES)


@pytest.mark.parametrize("name", [q.name for q in _keyed()])
def test_each_quantity_set_in_material_is_the_built_scenes_and_in_initial_the_start(tmp_path, name):
    q = QUANTITIES[name]
    scene = BALLS if name.startswith("ball_") else SMOKE if q.field.startswith("smoke.") else EVERYTHING
    base = load_scene(write_scene(tmp_path, scene)).experiment()
    own = default_theta(base.topology, base.params, base.state0, [name])[name]
    value = _other_value(q, own)
    toml = repr(value).replace("(", "[").replace(")", "]") if isinstance(value, list) else repr(value)
    material = scene if q.file_key in MATERIAL_QUANTITIES else SMALL_CLOTH + TAIL  # builder keys: the cloth
    text = material.replace("[camera]", f"[initial]\n{q.file_key} = {toml}\n\n[camera]")
    if "[material]" in text:
        text = text.replace("[material]", f"[material]\n{q.file_key} = {toml}", 1)
    else:
        text = text.replace("[camera]", f"[material]\n{q.file_key} = {toml}\n\n[camera]", 1)
    spec = load_scene(write_scene(tmp_path, text))
    exp = spec.experiment()
    built = default_theta(exp.topology, exp.params, exp.state0, [name])
    np.testing.assert_allclose(_scene_value(q, built), value, rtol=2e-6, atol=1e-7)
    start = spec.initial_theta(exp)
    np.testing.assert_allclose(_scene_value(q, start), value, rtol=2e-6, atol=1e-7)


def test_soft_body_masses_cells_and_their_errors(tmp_path):
    cell = BLOCK.replace("density = 500.0", 'density = 500.0\nmass_model = "cell"')
    exp = load_scene(write_scene(tmp_path, cell + TAIL)).experiment()
    masses = np.asarray(exp.params.particles.mass)
    np.testing.assert_allclose(masses, 500.0 * 0.1 ** 3, rtol=1e-6)  # a whole 0.1 m cell per particle
    assert float(exp.theta["density"]) == pytest.approx(500.0, rel=1e-6)  # the density they were made with
    given = np.linspace(0.05, 0.16, 12)
    exp = load_scene(write_scene(tmp_path, BLOCK.replace("density = 500.0", f"masses = {given.tolist()}")
                                 + TAIL)).experiment()
    np.testing.assert_allclose(np.asarray(exp.params.particles.mass), given, rtol=1e-6)
    assert "density" not in exp.theta  # they are not one density's: nothing restates them as one
    for edit, message in ((('density = 500.0', 'mass_model = "cells"'), 'mass_model must be "lumped" or "cell"'),
                          (('density = 500.0', 'masses = [1.0, 2.0]'), "masses needs one mass per particle of this "
                                                                       "body: 12, got 2"),
                          (('density = 500.0', 'masses = [-1.0' + ', 1.0' * 11 + ']'), "masses > 0"),
                          (('shape = "box"\nsize = [0.2, 0.1, 0.1]\ncells = [2, 1, 1]\npattern = 5',
                            'shape = "sphere"\nradius = 0.1\nmass_model = "cell"'), 'needs shape = "box"')):
        with pytest.raises(SceneFileError, match=message):
            load_scene(write_scene(tmp_path, BLOCK.replace(*edit) + TAIL)).experiment()


@pytest.mark.parametrize("section, key, value, message", [
    ("material", "fem_mu", "-1.0", r"\[material\] fem_mu must be positive"),
    ("initial", "fem_lambda", "0.0", r"\[initial\] fem_lambda must be positive"),
    ("material", "restitution", "1.5", r"\[material\] restitution must be strictly between 0 and 1"),
    ("initial", "particle_mass", "[0.1, 0.2]", r"\[initial\] particle_mass needs one value per particle: 21"),
])
def test_bad_quantity_values_are_named(tmp_path, section, key, value, message):
    text = EVERYTHING.replace("[camera]", f"[{section}]\n{key} = {value}\n\n[camera]") if section == "initial" else \
        EVERYTHING.replace("[material]", f"[material]\n{key} = {value}", 1)
    with pytest.raises(SceneFileError, match=message):
        spec = load_scene(write_scene(tmp_path, text))
        spec.initial_theta(spec.experiment())


def test_a_quantity_the_scene_does_not_have_is_named(tmp_path):
    with pytest.raises(SceneFileError, match=r"\[material\] fem_mu: the scene has no FEM shear modulus"):
        load_scene(write_scene(tmp_path, SMALL_CLOTH + "\n[material]\nfem_mu = 1000.0\n" + TAIL)).experiment()
