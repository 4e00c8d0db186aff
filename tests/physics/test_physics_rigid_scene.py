"""Rigid bodies as scene pieces: the builder, combine, pushes, checks and divergence reports."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import replace_paths, validate_traced


def _box(**kw):
    return gs.rigid_body(*gs.box_mesh(0.1, 0.2, 0.3), **kw)


def test_builder_places_the_mesh_and_derives_mass_properties():
    verts, faces = gs.box_mesh(0.1, 0.2, 0.3)
    rot = gs.quat_from_axis_angle((0.0, 0.0, 1.0), np.pi / 2)
    scene = gs.rigid_body(verts + [1.0, 0.0, 0.0], faces, density=500.0, pos=(0.0, 2.0, 0.0), rot=rot)
    top, par, st = scene.build(ground=True)
    assert float(par.rigid.mass[0]) == pytest.approx(500.0 * 0.2 * 0.4 * 0.6)
    # The mesh's centre (1, 0, 0) rotated by 90 deg about z, then moved up by 2.
    np.testing.assert_allclose(st.rigid.x[0], [0.0, 3.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(par.rigid.gyration[0], np.diag([0.2**2 + 0.3**2, 0.1**2 + 0.3**2, 0.1**2 + 0.2**2]) / 3,
                               rtol=1e-5, atol=1e-9)
    assert top.rigid.faces.shape == (12, 3) and top.rigid.contact == "penalty"


def test_combine_offsets_bodies_vertices_faces_and_pushes():
    scene = (_box(mass=1.0) + gs.cloth_grid(1, 1, 0.1, 0.1) + _box(mass=2.0)).add_push(1, (1.0, 0.0, 0.0))
    top, par, st = scene.build()
    np.testing.assert_array_equal(top.rigid.vertex_body, [0] * 8 + [1] * 8)
    assert int(top.rigid.faces.max()) == 15 and int(top.rigid.faces[12:].min()) == 8
    np.testing.assert_array_equal(top.rigid.push_body, [1])
    np.testing.assert_allclose(par.rigid.mass, [1.0, 2.0])
    assert top.num_particles == 4


def test_push_gives_the_impulse_of_its_window():
    # The window ends half a step after a step start: no step time falls near its edge.
    scene = _box(mass=2.0, pos=(0.0, 1.0, 0.0)).add_push(0, (4.0, 0.0, 0.0), start=0.0, end=0.101)
    top, par, st = scene.build(gravity=(0.0, 0.0, 0.0))
    traj = gs.simulate(top, par, st, frames=12, substeps=10, frame_dt=0.02)
    np.testing.assert_allclose(traj.rigid.v[-1, 0], [4.0 * 0.102 / 2.0, 0.0, 0.0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kw, words", [
    (dict(mass=-1.0), "mass"), (dict(restitution=1.5), "restitution"), (dict(contact_mu=np.nan), "contact_mu"),
    (dict(rot=(0.0, 0.0, 0.0, 0.0)), "rot"), (dict(pos=(0.0, np.inf, 0.0)), "pos"),
])
def test_bad_body_values_are_named(kw, words):
    with pytest.raises(ValueError, match=words):
        _box(**kw)


def test_open_mesh_is_refused():
    verts, faces = gs.box_mesh(0.1, 0.1, 0.1)
    with pytest.raises(ValueError, match="open"):
        gs.rigid_body(verts, faces[:-1], mass=1.0)


def test_bad_push_is_named():
    with pytest.raises(ValueError, match="body 3 out of range"):
        _box(mass=1.0).add_push(3, (1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="start"):
        _box(mass=1.0).add_push(0, (1.0, 0.0, 0.0), start=1.0, end=0.5)


def test_traced_checks_name_rigid_fields():
    top, par, st = _box(mass=1.0).build()
    check = jax.jit(lambda t, p: validate_traced(t, p, st))
    assert check(top, par).get() is None
    bad = replace_paths(par, {"rigid.contact_ke": jnp.array([np.nan])})
    assert check(top, bad).get().startswith("Params.rigid.contact_ke[0] = nan is not a finite value >= 0")
    bad_top = replace_paths(top, {"rigid.faces": top.rigid.faces.at[2, 1].set(40)})
    assert "Topology.rigid.faces[2]" in check(bad_top, par).get()


def test_diverged_body_is_named():
    top, par, st = _box(mass=1.0, pos=(0.0, 1.0, 0.0)).build(rigid_contact="none")
    traj = gs.simulate(top, par, st, frames=3, substeps=2)
    broken = replace_paths(traj, {"rigid.w": traj.rigid.w.at[2, 0, 1].set(np.inf)})
    assert gs.first_nonfinite(broken) == {"frame": 2, "quantity": "rigid.w", "particle": 0}
    with pytest.raises(gs.SimulationDiverged, match="state.rigid.w of body 0 is not finite at frame 2"):
        gs.check_finite(broken)


def test_stiff_or_buried_body_is_warned_before_the_run():
    low = _box(mass=1.0, pos=(0.0, 0.0, 0.0))  # half of it below the ground
    with pytest.warns(gs.physics.ContactWarning, match="rigid body 0 starts 0.2 m below the ground"):
        gs.simulate(*low.build(ground=True), frames=1, substeps=2)
    stiff = _box(mass=0.01, pos=(0.0, 1.0, 0.0), contact_ke=1e6)
    with pytest.warns(gs.physics.ContactWarning, match="too stiff for the time step.*times as many substeps"):
        gs.simulate(*stiff.build(ground=True), frames=1, substeps=2)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", gs.physics.ContactWarning)
        gs.simulate(*_box(mass=1.0, pos=(0.0, 1.0, 0.0), contact_ke=2e4).build(ground=True), frames=1, substeps=16)


def test_one_ground_flag_governs_the_bodies_too():
    """Issue 34, item 4: without a ground a body half below y = 0 falls freely (no warning, no push out at
    8 m/s); with one it meets it through the default penalty model; a contact model that contradicts the flag
    is refused, naming both."""
    import warnings

    low = _box(mass=1.0, pos=(0.0, 0.0, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", gs.physics.ContactWarning)
        top, par, st = low.build()  # ground=False, the default
        traj = gs.simulate(top, par, st, frames=5, substeps=10, frame_dt=0.01)
    assert top.rigid.contact == "none" and not top.ground
    v = np.asarray(traj.rigid.v[-1, 0])
    np.testing.assert_allclose(v, [0.0, -9.81 * 0.05, 0.0], rtol=1e-5, atol=1e-6)  # free fall, 50 steps
    top, _, _ = low.build(ground=True)
    assert top.ground and top.rigid.contact == "penalty"
    assert low.build(ground=True, rigid_contact="impulse")[0].rigid.contact == "impulse"
    for model in ("penalty", "impulse"):
        with pytest.raises(ValueError, match=f"rigid_contact='{model}'.*ground=False"):
            low.build(ground=False, rigid_contact=model)
    with pytest.raises(ValueError, match="ground=True, but rigid_contact='none'"):
        low.build(ground=True, rigid_contact="none")
    with pytest.raises(ValueError, match="rigid_contact must be one of"):
        low.build(ground=True, rigid_contact="sticky")
    # A scene without bodies takes any model quietly: it has nothing to apply it to.
    cloth = gs.cloth_grid(1, 1, 0.1, 0.1)
    assert cloth.build(ground=False, rigid_contact="penalty")[0].rigid.contact == "penalty"
