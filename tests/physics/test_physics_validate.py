"""Bad input is refused with a ValueError naming the field and index, before anything compiles;
a diverging rollout is reported with its first non-finite frame."""


import numpy as np
import jax.numpy as jnp
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import get_path, replace_paths


@pytest.fixture
def scene():
    return gs.cloth_grid(2, 2, 0.1, 0.1, bend_ke=1.0).add_springs([[0, 8]], 10.0)


def _simulate(top, par, st, **kw):
    return gs.simulate(top, par, st, **{"frames": 1, "substeps": 1, **kw})


def test_nan_position_is_named(scene):
    top, par, st = scene.build()
    bad = gs.particle_state(st.particles.x.at[4, 1].set(jnp.nan), st.particles.v)
    with pytest.raises(ValueError, match=r"State\.particles\.x\[4, 1\] is not finite"):
        _simulate(top, par, bad)


def test_inf_velocity_is_named(scene):
    top, par, st = scene.build()
    with pytest.raises(ValueError, match=r"State\.particles\.v\[2, 0\] is not finite"):
        _simulate(top, par, gs.particle_state(st.particles.x, st.particles.v.at[2, 0].set(jnp.inf)))


def test_out_of_range_index_is_named(scene):
    top, par, st = scene.build()
    bad = replace_paths(top, {"cloth.triangles": top.cloth.triangles.at[3, 2].set(99)})
    with pytest.raises(ValueError, match=r"Topology\.cloth\.triangles\[3\] .* out of range \[0, 9\)"):
        _simulate(bad, par, st)
    bad = replace_paths(top, {"springs.pairs": top.springs.pairs.at[0, 0].set(-1)})
    with pytest.raises(ValueError, match=r"Topology\.springs\.pairs\[0\]"):
        _simulate(bad, par, st)


def test_repeated_index_is_degenerate(scene):
    top, par, st = scene.build()
    bad = replace_paths(top, {"cloth.bend_edges": top.cloth.bend_edges.at[1, 3].set(top.cloth.bend_edges[1, 2])})
    with pytest.raises(ValueError, match=r"Topology\.cloth\.bend_edges\[1\] .* repeats a particle"):
        _simulate(bad, par, st)


def test_degenerate_rest_triangle_is_named():
    x = [[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 1, 0]]
    with pytest.raises(ValueError, match=r"Topology\.cloth\.triangles\[1\] = \[0, 1, 2\] has a degenerate rest shape"):
        gs.cloth_mesh(x, [[0, 1, 3], [0, 1, 2]]).build()


@pytest.mark.parametrize("field,index", [("particles.mass", 3), ("cloth.tri_ke", 5), ("springs.kd", 0),
                                         ("cloth.bend_ke", 2)])
def test_negative_mass_or_stiffness_is_named(scene, field, index):
    top, par, st = scene.build()
    bad = replace_paths(par, {field: get_path(par, field).at[index].set(-1.0)})
    with pytest.raises(ValueError, match=rf"Params\.{field}\[{index}\] is negative"):
        _simulate(top, bad, st)


def test_negative_scalar_contact_coefficient(scene):
    top, par, st = scene.build(ground=True)
    with pytest.raises(ValueError, match=r"Params\.contact\.mu\[\] is negative"):
        _simulate(top, replace_paths(par, {"contact.mu": jnp.asarray(-0.1)}), st)


def test_nonpositive_time_step(scene):
    top, par, st = scene.build()
    for dt in (0.0, -1e-3):
        with pytest.raises(ValueError, match="frame_dt must be > 0"):
            _simulate(top, par, st, frame_dt=dt)
    with pytest.raises(ValueError, match="substeps must be a positive int"):
        _simulate(top, par, st, substeps=0)


def test_wrong_shapes_are_named(scene):
    top, par, st = scene.build()
    with pytest.raises(ValueError, match=r"State\.particles\.x has shape \(8, 3\), expected \(9, 3\)"):
        _simulate(top, par, gs.particle_state(st.particles.x[:8], st.particles.v))
    with pytest.raises(ValueError, match=r"Params\.cloth\.tri_kd has shape \(7,\), expected \(8,\)"):
        _simulate(top, replace_paths(par, {"cloth.tri_kd": par.cloth.tri_kd[:7]}), st)
    with pytest.raises(ValueError, match=r"Params\.world\.gravity has shape \(2,\), expected \(3,\)"):
        _simulate(top, replace_paths(par, {"world.gravity": par.world.gravity[:2]}), st)


def test_builder_errors():
    with pytest.raises(ValueError, match="dim_x, dim_y >= 1"):
        gs.cloth_grid(0, 2, 0.1, 0.1)
    with pytest.raises(ValueError, match="out of range"):
        gs.particles([[0, 0, 0]]).add_springs([[0, 1]], 1.0)


def test_divergence_is_reported_with_its_frame():
    # A spring far too stiff for the time step: explicit integration blows up.
    top, par, st = gs.particles([[0, 0, 0], [1.1, 0, 0]], mass=1e-3).add_springs([[0, 1]], 1e6, rest=1.0).build(
        gravity=(0, 0, 0))
    with pytest.warns(gs.physics.StepWarning, match="too long for the elastic elements"):  # warned beforehand
        traj = gs.simulate(top, par, st, frames=40, substeps=2, frame_dt=1e-2)
    found = gs.first_nonfinite(traj)
    assert found is not None and found["frame"] > 0
    assert np.isfinite(np.asarray(traj.particles.x[found["frame"] - 1])).all()
    with pytest.raises(gs.SimulationDiverged, match=f"at frame {found['frame']}"):
        gs.check_finite(traj)
    fine = gs.simulate(*gs.particles([[0, 1, 0]]).build(), frames=3, substeps=2)
    assert gs.first_nonfinite(fine) is None and gs.check_finite(fine) is fine
