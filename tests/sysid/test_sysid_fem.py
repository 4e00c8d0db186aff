"""The FEM soft-body system-identification scenes (`scenes/fem.py`) and quantities: names and
aliases, density expands to lumped masses, a fit of the damping stays under the explicit step's limit (the material's recovery from 50 % off on a reduced demo scene:
tests/cli/test_cli_fem.py)."""

import types

import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.geometry import soft_body
from gradsim_jax.geometry.tets import box_tets, tet_volumes
from gradsim_jax.physics.stability import STABILITY_MARGIN, StepWarning, step_report
from gradsim_jax.sysid.identify import stable_bounds
from gradsim_jax.sysid.quantities import QUANTITIES, assemble, canonical


def test_fem_quantities_answer_to_their_params_paths_and_builder_names():
    for name, aliases in {"fem_mu": ("fem.k_mu", "k_mu", "tet_k_mu"),
                          "fem_lambda": ("fem.k_lambda", "k_lambda", "tet_k_lambda"),
                          "fem_damping": ("fem.k_damp", "k_damp", "tet_k_damp"),
                          "density": ("fem_density",), "particle_mass": ("masses",)}.items():
        assert all(canonical(a) == name for a in (name, *aliases))
    assert QUANTITIES["fem_mu"].unit == "Pa" and QUANTITIES["density"].unit == "kg/m^3"


def test_density_expands_to_lumped_masses_summing_to_density_times_volume():
    x, t = box_tets((2, 1, 1), (0.3, 0.1, 0.2), pattern=6)
    topology, params, state0 = soft_body(x, t, density=700.0, k_mu=1e3, k_lambda=1e3).build()
    theta = sysid.default_theta(topology, params, state0, ["density", "fem_mu"])
    assert abs(float(theta["density"]) - 700.0) < 1e-2
    # what assemble reads of an Experiment
    exp = types.SimpleNamespace(topology=topology, params=params, state0=state0, dtype=jnp.float32)
    new, _ = assemble(exp, {"density": jnp.asarray(1234.0), "fem_mu": jnp.asarray(5.0)})
    mass = np.asarray(new.particles.mass, np.float64)
    assert abs(mass.sum() - 1234.0 * tet_volumes(x, t).sum()) < 1e-4 * mass.sum()
    np.testing.assert_allclose(mass, np.asarray(params.particles.mass) * 1234.0 / 700.0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(new.fem.k_mu), 5.0)


def _cube_experiment(substeps):
    x, t = box_tets((1, 1, 1), (0.1, 0.1, 0.1), pattern=5)
    topology, params, state0 = soft_body(x, t, density=1000.0, k_mu=2e3, k_lambda=5e3, k_damp=100.0).build()
    return types.SimpleNamespace(topology=topology, params=params, state0=state0, dtype=jnp.float32,
                                 frame_dt=1.0 / 30.0, substeps=substeps)


def test_a_fit_of_fem_damping_is_bounded_under_the_explicit_step_limit():
    exp = _cube_experiment(substeps=64)
    free = ("fem_mu", "fem_damping")
    theta = sysid.default_theta(exp.topology, exp.params, exp.state0, list(free))
    same, bounds = stable_bounds(exp, theta, free)
    assert same is theta and set(bounds) == {"fem_damping"} and bounds["fem_damping"][0] is None
    hi = bounds["fem_damping"][1]
    assert hi > 100.0
    # At the bound, the step's criterion is STABILITY_MARGIN of the limit (4).
    params, _ = assemble(exp, {**theta, "fem_damping": jnp.asarray(hi)})
    dt = exp.frame_dt / exp.substeps
    assert step_report(exp.topology, params, dt=dt).criterion == pytest.approx(4.0 * STABILITY_MARGIN, rel=1e-3)
    # No bound when the damping is not free.
    assert stable_bounds(exp, theta, ("fem_mu",))[1] == {}


def test_a_start_past_the_stable_bounds_moves_under_it_with_a_warning():
    exp = _cube_experiment(substeps=4)  # 100 Pa s is past the limit at dt = 1 / 120 s
    free = ("fem_damping",)
    theta = sysid.default_theta(exp.topology, exp.params, exp.state0, list(free))
    params, _ = assemble(exp, theta)
    assert not step_report(exp.topology, params, dt=exp.frame_dt / 4).stable
    with pytest.warns(StepWarning, match="past its stability limit.*starts from fem_damping .* instead of 100"):
        moved, bounds = stable_bounds(exp, theta, free)
    assert float(moved["fem_damping"]) < bounds["fem_damping"][1] < 100.0
    params, _ = assemble(exp, moved)
    assert step_report(exp.topology, params, dt=exp.frame_dt / 4).stable
    # Far past the limit (2 substeps would need the damping below half its start): a warning naming the remedy.
    with pytest.warns(StepWarning, match="no free quantity within 2x.*runs unbounded.*substeps"):
        assert stable_bounds(_cube_experiment(substeps=2), theta, free) == (theta, {})


def test_cloth_stiffness_and_mass_fits_are_bounded_where_the_step_turns_unstable():
    import gradsim_jax as gs
    from gradsim_jax.render import RenderSettings, look_at_camera

    topology, params, state0 = gs.cloth_grid(4, 4, 0.05, 0.05, mass=0.01, tri_ke=50.0, tri_ka=50.0, tri_kd=0.1, bend_ke=1e-3,
                                             fix_top=True).build()
    exp = sysid.Experiment(topology=topology, params=params, state0=state0, camera=look_at_camera(1.0, 20.0, 0.0),
                           faces=topology.cloth.triangles, colors=None, lights=None, background=jnp.zeros(3),
                           settings=RenderSettings(), frames=2, substeps=16, frame_dt=1.0 / 60.0, theta={})
    free = ("stiffness", "mass", "damping")
    theta = sysid.default_theta(topology, params, state0, list(free))
    same, bounds = stable_bounds(exp, theta, free)
    assert same is theta and bounds["stiffness"][0] is None and bounds["mass"][1] is None
    hi, lo = bounds["stiffness"][1], bounds["mass"][0]
    assert hi > float(theta["stiffness"]) and lo < float(theta["mass"])
    dt = exp.frame_dt / exp.substeps
    for changed in ({"stiffness": hi}, {"mass": lo}):
        params_at, _ = assemble(exp, {**theta, **{k: jnp.asarray(v) for k, v in changed.items()}})
        assert step_report(topology, params_at, dt=dt).criterion == pytest.approx(4.0 * STABILITY_MARGIN, rel=3e-3)
    # The criterion is the masses' inverse: the lowest stable mass is the start's criterion over the bound's.
    params0, _ = assemble(exp, theta)
    base = step_report(topology, params0, dt=dt).criterion
    assert lo == pytest.approx(float(theta["mass"]) * base / (4.0 * STABILITY_MARGIN), rel=3e-3)
