"""[[collider]] tables in scene files (issue 39): static shapes the cloth meets, drawn in their colour, their
contact coefficients as quantities ([material] collider_mu, [fit] free), and bad tables named."""

import numpy as np
import pytest

from gradsim_jax.scenefile import SceneFileError, help_text, load_scene

from cli_scenes import SCENE_TAIL, write_scene

#: A 2 x 2 cloth held flat 0.3 m above a red ball of radius 0.2 m, and a box beside it.
DRAPE = """
[scene]
grid = [2, 2]
cell = [0.2, 0.2]
pos = [-0.2, 0.5, 0.2]
rot = [0.7071068, -0.7071068, 0.0, 0.0]

[[collider]]
shape = "sphere"
radius = 0.2
mu = 0.3
color = [0.9, 0.1, 0.1]

[[collider]]
shape = "box"
pos = [0.6, 0.0, 0.0]
half_extents = [0.1, 0.2, 0.1]
ke = 2000.0

[[collider]]
shape = "plane"
pos = [0.0, -0.3, 0.0]
""" + SCENE_TAIL


def test_colliders_are_built_drawn_in_their_colours_and_their_coefficients_are_quantities(tmp_path):
    text = DRAPE.replace("[camera]", "[material]\ncollider_ke = 1500.0\n\n[camera]").replace(
        'free = ["mass"]', 'free = ["collider_mu"]')
    spec = load_scene(write_scene(tmp_path, text))
    exp = spec.experiment()
    assert exp.topology.colliders.kinds == ("sphere", "box", "plane")
    np.testing.assert_allclose(np.asarray(exp.params.colliders.mu), [0.3, 0.5, 0.5])
    np.testing.assert_allclose(np.asarray(exp.params.colliders.ke), 1500.0)  # [material] sets every collider
    cloth_faces = 8
    assert exp.faces.shape[0] == cloth_faces + 320 + 12  # the plane is not drawn
    rgb = np.asarray(exp.colors.rgb)
    np.testing.assert_allclose(rgb[cloth_faces:cloth_faces + 320], [[0.9, 0.1, 0.1]] * 320, atol=1e-7)
    np.testing.assert_allclose(rgb[cloth_faces + 320:], 0.6, atol=1e-7)
    assert spec.fit_config.free == ("collider_mu",)
    assert "[[collider]]" in help_text()


def test_a_collider_not_drawn_still_collides(tmp_path):
    """[[collider]] drawn = false: a ball already in the background picture (or left out by the video's mask)
    leaves the render's faces, colours and all, and stays in the physics."""
    spec = load_scene(write_scene(tmp_path, DRAPE.replace("color = [0.9, 0.1, 0.1]", "color = [0.9, 0.1, 0.1]\n"
                                                                                    "drawn = false")))
    exp = spec.experiment()
    assert exp.topology.colliders.kinds == ("sphere", "box", "plane")
    assert exp.faces.shape[0] == 8 + 12  # the cloth and the box
    np.testing.assert_allclose(np.asarray(exp.colors.rgb)[8:], 0.6, atol=1e-7)
    assert int(np.asarray(exp.faces).max()) >= 9 + 162  # the box's vertices still follow the sphere's


@pytest.mark.parametrize("table,message", [
    ('shape = "cylinder"\nradius = 0.1', "shape must be one of plane, sphere, box, capsule"),
    ('shape = "sphere"', "a sphere needs radius"),
    ('shape = "capsule"\nradius = 0.1', "a capsule needs half_height"),
    ('shape = "box"\nhalf_extents = [0.1, 0.1, 0.1]\nradius = 0.2', "a box takes no radius"),
    ('shape = "sphere"\nradius = -0.1', "radius must be > 0"),
    ('shape = "box"\nhalf_extents = [0.1, 0.1, 0.1]\nmu = -1.0', "mu must be >= 0"),
    ('shape = "box"\nhalf_extents = [0.1, 0.1, 0.1]\nrot = [0.0, 0.0, 0.0, 0.0]', "zero quaternion"),
])
def test_bad_collider_tables_are_named(tmp_path, table, message):
    text = DRAPE.replace("[camera]", f"[[collider]]\n{table}\n\n[camera]")
    with pytest.raises(SceneFileError, match=r"\[\[collider\]\] 3: .*" + message):
        load_scene(write_scene(tmp_path, text)).experiment()


def test_a_collider_quantity_without_colliders_is_refused(tmp_path):
    text = DRAPE.split("[[collider]]")[0] + SCENE_TAIL.replace('free = ["mass"]', 'free = ["collider_mu"]')
    with pytest.raises(SceneFileError, match="collider_mu does not apply to this scene"):
        load_scene(write_scene(tmp_path, text)).experiment()


def test_a_keyframed_collider_moves_and_bad_keys_are_named(tmp_path):
    moving = DRAPE.replace('ke = 2000.0', 'ke = 2000.0\nkey_times = [0.0, 0.5]\nkey_pos = [0.6, 0.0, 0.0, 0.6, 0.3, 0.0]')
    exp = load_scene(write_scene(tmp_path, moving)).experiment()
    col = exp.params.colliders
    np.testing.assert_allclose(np.asarray(col.key_times), [0.0, 0.5])
    np.testing.assert_allclose(np.asarray(col.key_position)[1], [[0.6, 0.0, 0.0], [0.6, 0.3, 0.0]], atol=1e-7)
    np.testing.assert_allclose(np.asarray(col.key_position)[0], 0.0, atol=1e-7)  # the static ball repeats its pose
    for keys, match in (("key_times = [0.0, 0.5]\nkey_pos = [0.6, 0.0, 0.0]", "key_pos must hold x, y, z for each"),
                        ("key_times = [0.5, 0.0]\nkey_pos = [0.6, 0.0, 0.0, 0.6, 0.3, 0.0]", "must increase"),
                        ("key_pos = [0.6, 0.0, 0.0]", "need key_times")):
        path = write_scene(tmp_path, DRAPE.replace('ke = 2000.0', 'ke = 2000.0\n' + keys), name="bad.toml")
        with pytest.raises(SceneFileError, match=match):
            load_scene(path).experiment()


def test_a_mesh_collider_from_a_file_and_a_missing_file_named(tmp_path):
    from gradsim_jax.geometry.primitives import box_mesh

    v, f = box_mesh(0.1, 0.2, 0.1)
    (tmp_path / "block.obj").write_text("".join(f"v {a} {b} {c}\n" for a, b, c in v)
                                        + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in f))
    text = DRAPE.replace('shape = "box"', 'shape = "mesh"\nmesh = "block.obj"\nscale = [1.0, 1.0, 1.0]').replace(
        "half_extents = [0.1, 0.2, 0.1]\n", "")
    exp = load_scene(write_scene(tmp_path, text)).experiment()
    assert exp.topology.colliders.kinds == ("sphere", "mesh", "plane")
    np.testing.assert_allclose(exp.topology.colliders.meshes[1].vertices, v)
    assert exp.faces.shape[0] == 8 + 320 + 12  # the block's 12 triangles drawn
    with pytest.raises(SceneFileError, match="mesh file not found"):
        load_scene(write_scene(tmp_path, text.replace("block.obj", "nothing.obj"), name="bad.toml")).experiment()
