"""Rigid bodies in scene files: [[body]] and [[body_push]] tables, scenes of bodies only or of a cloth and
bodies, body quantities in [fit] and [initial], and clear errors for bad bodies."""

import json
from pathlib import Path

import numpy as np
import pytest

from gradsim_jax.cli import main
from gradsim_jax.geometry import box_mesh
from gradsim_jax.scenefile import SceneFileError, help_text, load_scene

from cli_scenes import SMALL_CLOTH, write_scene

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rigid_scene.toml"

TAIL = """
[camera]
distance = 1.6
elevation = 25.0
at = [0.0, 0.1, 0.0]

[render]
width = 16
height = 16

[simulation]
fps = 30.0
substeps = 8
frames = 3

[fit]
free = ["body_mass"]
"""

BOX = """
[[body]]
shape = "box"
half_extents = [0.1, 0.1, 0.1]
mass = 1.0
pos = [0.0, 0.3, 0.0]
"""


def build(folder, text):
    spec = load_scene(write_scene(folder, text))
    exp = spec.experiment()
    spec.initial_theta(exp)
    return exp


@pytest.mark.slow
def test_render_then_fit_body_mass_of_the_example(tmp_path):
    target = tmp_path / "target.gif"
    assert main(["render", str(EXAMPLE), "--out", str(target)]) == 0
    out = tmp_path / "fit"
    rc = main(["fit", str(EXAMPLE), "--target", str(target), "--true", "--out", str(out), "--no-progress",
               "--iterations", "40", "--polish", "0"])
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["free"] == ["body_mass"]
    assert report["initial"]["body_mass"] == pytest.approx(1.3)
    assert report["relative_error"]["body_mass"] < 0.01, report["estimated"]


def test_mixed_cloth_and_bodies_build_and_render(tmp_path):
    obj = tmp_path / "cube.obj"
    verts, faces = box_mesh(0.05, 0.05, 0.05)
    obj.write_text("".join(f"v {x} {y} {z}\n" for x, y, z in verts)
                   + "".join(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces))
    text = SMALL_CLOTH + """
rigid_contact = "impulse"

[[body]]
shape = "sphere"
radius = 0.08
subdivisions = 1
density = 500.0
pos = [0.3, 0.4, 0.0]
velocity = [0.0, 0.0, 0.5]
restitution = 0.7
color = [0.2, 0.4, 0.9]

[[body]]
mesh = "cube.obj"
scale = 2.0
mass = 0.5
restitution = 0.7
pos = [-0.3, 0.4, 0.0]
omega = [0.0, 3.0, 0.0]

[[body_push]]
body = 1
force = [1.0, 0.0, 0.0]
end = 0.05
""" + TAIL.replace('["body_mass"]', '["mass", "restitution"]').replace("substeps = 8", "substeps = 32") + "\n[initial]\nrestitution = 0.5\n"
    spec = load_scene(write_scene(tmp_path, text))
    exp = spec.experiment()
    assert exp.topology.rigid.contact == "impulse"
    assert exp.topology.rigid.particles  # the cloth meets the bodies by default; [scene] says otherwise
    off = text.replace('rigid_contact = "impulse"', 'rigid_contact = "impulse"\nparticle_body_contact = false')
    assert not load_scene(write_scene(tmp_path, off)).experiment().topology.rigid.particles
    # a sphere body weighs what the ball weighs, whatever its subdivisions (sphere_mesh fits the volume)
    assert np.asarray(exp.params.rigid.mass)[0] == pytest.approx(500.0 * 4 / 3 * np.pi * 0.08 ** 3, rel=1e-6)
    assert np.asarray(exp.params.rigid.mass)[1] == pytest.approx(0.5)
    assert np.asarray(exp.params.rigid.push_force).tolist() == [[1.0, 0.0, 0.0]]
    assert float(spec.initial_theta(exp)["restitution"]) == pytest.approx(0.5)
    # Sphere faces take the body's colour; the cloth keeps its checkerboard.
    cloth_faces = np.asarray(exp.topology.cloth.triangles).shape[0]
    np.testing.assert_allclose(np.asarray(exp.colors.rgb)[cloth_faces], [0.2, 0.4, 0.9])
    out = tmp_path / "mixed.gif"
    assert main(["render", str(tmp_path / "scene.toml"), "--out", str(out)]) == 0
    assert out.is_file()


def test_bodies_only_scene_needs_no_scene_section_and_a_single_table_is_one_body(tmp_path):
    exp = build(tmp_path, BOX + TAIL)
    assert exp.topology.num_particles == 0 and np.asarray(exp.params.rigid.mass).tolist() == [1.0]
    exp = build(tmp_path, BOX.replace("[[body]]", "[body]") + TAIL)
    assert np.asarray(exp.params.rigid.vertices).shape == (8, 3)


def test_help_lists_the_body_tables():
    text = help_text()
    assert "[[body]]" in text and "[[body_push]]" in text and "rigid_contact" in text
    assert "particle_body_contact" in text and "body_mass" in text


@pytest.mark.parametrize("edit, message", [
    (("half_extents = [0.1, 0.1, 0.1]", "half_extents = [0.1, -0.1, 0.1]"), r"\[\[body\]\] 0: half_extents must be positive"),
    (('shape = "box"', 'shape = "teapot"'), r"\[\[body\]\] 0: shape must be one of box, sphere"),
    (('shape = "box"', 'shape = "sphere"'), r"\[\[body\]\] 0: half_extents does not apply to shape 'sphere'"),
    (("half_extents = [0.1, 0.1, 0.1]", ""), r"\[\[body\]\] 0: shape 'box' needs half_extents"),
    (('shape = "box"', 'shape = "box"\nmesh = "m.obj"'), r"\[\[body\]\] 0: give exactly one of shape"),
    (("mass = 1.0", "mass = 1.0\ndensity = 10.0"), r"\[\[body\]\] 0: give density or mass, not both"),
    (("mass = 1.0", "mass = -1.0"), r"\[\[body\]\] 0: mass must be positive"),
    (("mass = 1.0", 'mass = "heavy"'), r"\[\[body\]\] 0: mass must be a number"),
    (("mass = 1.0", "restitution = 1.5"), r"\[\[body\]\] 0: restitution must be in \[0, 1\]"),
    (("mass = 1.0", "rot = [0.0, 0.0, 0.0, 0.0]"), r"\[\[body\]\] 0: rot must be a nonzero quaternion"),
    (("mass = 1.0", "colour = [1.0, 0.0, 0.0]"), r"\[\[body\]\] 0: unknown key 'colour'"),
    (('shape = "box"\nhalf_extents = [0.1, 0.1, 0.1]', 'mesh = "missing.obj"'), r"\[\[body\]\] 0: .*no such mesh file"),
    (("[camera]", "[[body_push]]\nbody = 3\nforce = [1.0, 0.0, 0.0]\n[camera]"),
     r"\[\[body_push\]\] 0: body must be the index of a \[\[body\]\], in \[0, 1\)"),
    (("[camera]", "[[body_push]]\nbody = 0\n[camera]"), r"\[\[body_push\]\] 0: missing key 'force'"),
    (("[camera]", "[[body_push]]\nbody = 0\nforce = [1.0, 0.0, 0.0]\nstart = 0.2\nend = 0.1\n[camera]"),
     r"\[\[body_push\]\] 0: start \(0.2 s\) must come before end"),
    (("[[body]]", '[scene]\nrigid_contact = "sticky"\n[[body]]'), r"\[scene\] rigid_contact must be one of"),
])
def test_bad_bodies_name_table_index_and_key(tmp_path, edit, message):
    old, new = edit
    text = (BOX + TAIL).replace(old, new, 1)
    # A second, valid body first: the error names the bad one's index.
    if "[[body]] 0" in message:
        message = message.replace("0:", "1:")
        text = BOX.replace("0.3, 0.0]", "0.3, 1.0]") + text
    with pytest.raises(SceneFileError, match=message):
        build(tmp_path, text)


@pytest.mark.parametrize("text, message", [
    (SMALL_CLOTH + TAIL, r"\[fit\] free: body_mass does not apply to this scene \(no rigid body"),
    (SMALL_CLOTH + TAIL.replace('["body_mass"]', '["mass"]') + "\n[initial]\nbody_mass = 2.0\n",
     r"\[initial\] body_mass: the scene has no"),
    (BOX + TAIL + "\n[initial]\nrestitution = 1.0\n", r"\[initial\] restitution must be strictly between 0 and 1"),
    (BOX + BOX.replace("mass = 1.0", "mass = 2.0") + TAIL, r"body_mass is fitted as one value for every body"),
    ("[fit]\nfree = [\"mass\"]\n", r"missing section \[scene\]"),
    (TAIL + "[scene]\nground = true\n", r"\[scene\] needs exactly one of 'grid' or 'mesh' \(a cloth\), or the file \[\[body\]\]"),
])
def test_body_quantities_must_fit_the_scene(tmp_path, text, message):
    with pytest.raises(SceneFileError, match=message):
        build(tmp_path, text)


def test_one_ground_flag_governs_the_bodies_of_a_scene_file(tmp_path):
    """Issue 34, item 4: [scene] ground governs the bodies too. With [[body]] tables the ground is on by
    default (penalty contact); ground = false lets them fall; a rigid_contact that contradicts the ground is
    refused before anything is built."""
    exp = build(tmp_path, BOX + TAIL)
    assert exp.topology.ground and exp.topology.rigid.contact == "penalty"
    exp = build(tmp_path, "[scene]\nground = false\n" + BOX + TAIL)
    assert not exp.topology.ground and exp.topology.rigid.contact == "none"
    exp = build(tmp_path, '[scene]\nrigid_contact = "impulse"\n' + BOX + TAIL)
    assert exp.topology.ground and exp.topology.rigid.contact == "impulse"
    for text, message in (('[scene]\nground = false\nrigid_contact = "penalty"\n', "contradicts ground = false"),
                          ('[scene]\nrigid_contact = "none"\n', "contradicts ground = true \\(the default")):
        with pytest.raises(SceneFileError, match=message):
            build(tmp_path, text + BOX + TAIL)


def test_contact_smoothing_from_the_scene_section(tmp_path):
    exp = build(tmp_path, "[scene]\nground = true\ncontact_smoothing = 0.002\n\n" + BOX + TAIL)
    assert exp.params.world.contact_smoothing == pytest.approx(0.002)
    with pytest.raises(SceneFileError, match="contact_smoothing must be finite and >= 0"):
        build(tmp_path, "[scene]\nground = true\ncontact_smoothing = -0.002\n\n" + BOX + TAIL)
