"""FEM soft bodies in scene files: [[soft_body]] tables (primitives, tet files, closed surfaces filled by
TetGen) beside a cloth and rigid bodies, and clear errors for bad ones."""

import numpy as np
import pytest

from gradsim_jax.geometry import box_mesh
from gradsim_jax.geometry import box_tets, save_tets, tet_volumes
from gradsim_jax.scenefile import SceneFileError, help_text, load_scene

from cli_scenes import SCENE_TAIL, SMALL_CLOTH, write_scene

TAIL = SCENE_TAIL

SOFT = """
[[soft_body]]
shape = "box"
size = [0.2, 0.1, 0.16]
cells = [2, 1, 2]
pattern = 5
density = 500.0
k_mu = 4000.0
k_lambda = 6000.0
k_damp = 2.0
pos = [0.4, 0.2, 0.0]
velocity = [0.0, 0.0, 1.0]
"""


def test_soft_box_after_the_cloth_and_from_a_tet_file(tmp_path):
    verts, tets = box_tets((1, 1, 1), (0.1, 0.1, 0.1))
    save_tets(tmp_path / "cube.tet", verts, tets)
    text = SMALL_CLOTH + SOFT + """
[[soft_body]]
mesh = "cube.tet"
scale = 2.0
pos = [-0.5, 0.3, 0.0]
pinned = [0]
""" + TAIL
    exp = load_scene(write_scene(tmp_path, text)).experiment()
    top, par, st = exp.topology, exp.params, exp.state0
    cloth_n = int(np.max(np.asarray(top.cloth.triangles))) + 1
    assert top.fem.tets.shape == (20 + 6, 4)  # 4 cells x 5, then the file's 6
    assert int(np.min(np.asarray(top.fem.tets))) == cloth_n  # soft particles follow the cloth's
    x = np.asarray(st.particles.x, np.float64)
    soft = x[cloth_n:cloth_n + 18]
    np.testing.assert_allclose(soft.mean(0), [0.4, 0.2, 0.0], atol=1e-6)  # the box is centred on pos
    np.testing.assert_allclose(np.asarray(st.particles.v)[cloth_n:cloth_n + 18], [[0.0, 0.0, 1.0]] * 18)
    mass = np.asarray(par.particles.mass, np.float64)
    assert mass[cloth_n:cloth_n + 18].sum() == pytest.approx(500.0 * 0.2 * 0.1 * 0.16, rel=1e-5)
    assert mass[cloth_n + 18:].sum() == pytest.approx(1000.0 * 0.2 ** 3, rel=1e-5)  # scaled x2, default density
    assert np.asarray(top.particles.pinned)[cloth_n + 18]  # the file body's vertex 0
    np.testing.assert_allclose(np.asarray(par.fem.k_mu), [4000.0] * 20 + [1e5] * 6)
    np.testing.assert_allclose(np.asarray(par.fem.k_lambda)[:20], 6000.0)
    assert exp.faces.shape[0] == top.cloth.triangles.shape[0] + top.fem.surface.shape[0]


def test_soft_body_only_scene_from_a_closed_surface(tmp_path):
    pytest.importorskip("tetgen")
    import trimesh

    trimesh.Trimesh(*box_mesh(0.1, 0.05, 0.1)).export(tmp_path / "slab.obj")
    text = """
[scene]
ground = true

[[soft_body]]
surface = "slab.obj"
pos = [0.0, 0.06, 0.0]
""" + TAIL.replace('free = ["mass"]', 'free = ["mass"]')
    exp = load_scene(write_scene(tmp_path, text)).experiment()
    vol = tet_volumes(np.asarray(exp.params.fem.rest_x, np.float64), np.asarray(exp.topology.fem.tets))
    assert vol.min() > 0 and vol.sum() == pytest.approx(0.2 * 0.1 * 0.2, rel=1e-5)


@pytest.mark.parametrize("table, message", [
    ("", "give exactly one of shape"),
    ('shape = "box"\nmesh = "a.tet"', "give exactly one of shape"),
    ('shape = "torus"', "shape must be one of box, sphere, cylinder"),
    ('shape = "box"', "shape 'box' needs size"),
    ('shape = "cylinder"\nradius = 0.1', "needs height"),
    ('shape = "sphere"\nradius = -0.1', "radius must be positive"),
    ('shape = "box"\nsize = [0.1, 0.1, 0.1]\nk_mu = -1.0', "k_mu must be 0 or more"),
    ('shape = "box"\nsize = [0.1, 0.1, 0.1]\npattern = 4', "pattern must be 5 or 6"),
    ('mesh = "missing.tet"', "missing.tet"),
])
def test_bad_soft_bodies_are_named(tmp_path, table, message):
    text = "[scene]\nground = true\n\n[[soft_body]]\n" + table + "\n" + TAIL
    with pytest.raises(SceneFileError, match=r"\[\[soft_body\]\] 0:.*" + message):
        load_scene(write_scene(tmp_path, text)).experiment()


def test_help_lists_soft_bodies():
    text = help_text()
    assert "[[soft_body]]" in text and "fem_mu" in text


def test_fit_table_sets_the_density_field_stage_of_a_mass_fit(tmp_path):
    text = "[scene]\nground = true\n" + SOFT + TAIL.replace('free = ["mass"]', 'free = ["particle_mass"]\n'
                                                            'density_first = 40\ndensity_learning_rate = 0.2')
    config = load_scene(write_scene(tmp_path, text)).fit_config
    assert (config.density_first, config.density_learning_rate) == (40, 0.2)
    assert load_scene(write_scene(tmp_path, "[scene]\n" + SOFT + TAIL)).fit_config.density_first == 0
    bad = TAIL.replace('free = ["mass"]', 'free = ["fem_mu"]\ndensity_first = 40')
    with pytest.raises(SceneFileError, match=r"\[fit\] density_first .*particle_mass must be in free"):
        load_scene(write_scene(tmp_path, "[scene]\n" + SOFT + bad)).fit_config
    bad = TAIL.replace('free = ["mass"]', 'free = ["particle_mass"]\ndensity_learning_rate = 0.0')
    with pytest.raises(SceneFileError, match=r"\[fit\] density_learning_rate must be a positive number"):
        load_scene(write_scene(tmp_path, "[scene]\n" + SOFT + bad)).fit_config
    assert "density_first" in help_text()
