"""Scene files with the implicit step ([simulation] integrator, cg_iterations) and springs on every mesh edge
([material] spring_ke, spring_kd): what they build, and the settings refused with the key named."""

import numpy as np
import pytest

from gradsim_jax.physics import ImplicitEuler, ImpulseContact, SemiImplicitEuler
from gradsim_jax.physics.colliders import collider_faces
from gradsim_jax.scenefile import SceneFileError, load_scene

from cli_scenes import SCENE_TAIL, SMALL_CLOTH, write_scene


def _scene_file(tmp_path, material="", simulation=""):
    tail = SCENE_TAIL.replace("[simulation]\n", "[simulation]\n" + simulation)
    return write_scene(tmp_path, SMALL_CLOTH + "\n[material]\nmass = 0.05\n" + material + tail)


def test_scene_files_take_the_implicit_step_and_edge_springs(tmp_path):
    exp = load_scene(_scene_file(tmp_path, "spring_ke = 300.0\nspring_kd = 0.5\n",
                                 'integrator = "implicit"\ncg_iterations = 12\n')).experiment()
    assert exp.integrator == ImplicitEuler(iterations=12)
    # a 2 x 2 grid's triangle mesh: 12 sides of cells and 4 diagonals
    assert exp.topology.springs.pairs.shape == (16, 2)
    np.testing.assert_allclose(np.asarray(exp.params.springs.ke), 300.0)
    assert {"spring_stiffness", "spring_damping"} <= set(exp.theta)
    plain = load_scene(_scene_file(tmp_path)).experiment()
    assert isinstance(plain.integrator, SemiImplicitEuler) and plain.topology.springs.pairs.shape == (0, 2)


@pytest.mark.parametrize("material, simulation, message", [
    ("", 'integrator = "backward"\n', "integrator must be one of semi_implicit, implicit"),
    ("", 'integrator = "implicit"\ncg_iterations = 0\n', "cg_iterations must be at least 1"),
    ("", 'integrator = "implicit"\ncontact = "explicit"\n', 'remove contact = "explicit"'),
    ("", 'integrator = "implicit"\ncg_tolerance = 1.5\n', "cg_tolerance must be in"),
    ("spring_ke = -5.0\n", "", "spring_ke and spring_kd must be 0 or more"),
])
def test_bad_implicit_settings_are_named(tmp_path, material, simulation, message):
    with pytest.raises(SceneFileError, match=message):
        load_scene(_scene_file(tmp_path, material, simulation)).experiment()


def test_blenders_stopping_rule_is_a_scene_file_setting(tmp_path):
    exp = load_scene(_scene_file(tmp_path, "spring_ke = 300.0\n", 'integrator = "implicit"\ncg_iterations = 100\n'
                                                                   "cg_tolerance = 0.01\n")).experiment()
    assert exp.integrator == ImplicitEuler(iterations=100, tolerance=0.01)


def test_scene_files_take_blenders_collision_response_and_bending(tmp_path):
    collider = '\n[[collider]]\nshape = "sphere"\npos = [0.0, -0.3, 0.0]\nradius = 0.1\nsegments = [12, 6]\nmu = 0.05\n'
    text = (SMALL_CLOTH.replace("[scene]\n", "[scene]\nground = true\nground_size = 4.0\nparticle_radius = 0.03\n")
            + "\n[material]\nmass = 0.05\nspring_ke = 300.0\nbending_model = \"angular\"\nbend_ke = 4.0\n" + collider
            + SCENE_TAIL.replace("[simulation]\n", '[simulation]\nintegrator = "implicit"\ncontact = "impulse"\n'
                                 "fps = 25.0\n"))
    exp = load_scene(write_scene(tmp_path, text)).experiment()
    assert exp.integrator.contact == ImpulseContact(frame_time=1.0 / 25.0, ground_size=4.0)
    assert exp.topology.cloth.bending == "angular" and exp.topology.colliders.segments == ((12, 6),)
    assert len(collider_faces(exp.topology.colliders)) == 2 * 12 * 5  # the UV sphere, drawn and met


@pytest.mark.parametrize("scene, material, collider, simulation, message", [
    ("", "", "", 'contact = "impulse"\n', 'set integrator = "implicit"'),
    ("", "", "", 'contact = "sticky"\n', 'contact must be "implicit", "explicit" or "impulse"'),
    ("ground_size = -1.0\n", "", "", 'integrator = "implicit"\ncontact = "impulse"\n', "ground_size must be >= 0"),
    ("", 'bending_model = "hinge"\n', "", "", "bending must be"),
    ("", "", '\n[[collider]]\nshape = "box"\nhalf_extents = [0.1, 0.1, 0.1]\nsegments = [8, 4]\n', "",
     "segments"),
])
def test_bad_blender_collision_settings_are_named(tmp_path, scene, material, collider, simulation, message):
    text = (SMALL_CLOTH.replace("[scene]\n", "[scene]\n" + scene) + "\n[material]\nmass = 0.05\n" + material
            + collider + SCENE_TAIL.replace("[simulation]\n", "[simulation]\n" + simulation))
    with pytest.raises(SceneFileError, match=message):
        load_scene(write_scene(tmp_path, text)).experiment()
