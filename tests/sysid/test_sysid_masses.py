"""Masses a user gives are kept (issue 34, item 2): a quantity that is not fitted never overwrites what the
scene holds, quantities that set the same masses do not fight, and two sources of mass that disagree say so."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax import sysid
from gradsim_jax.physics import replace_paths
from gradsim_jax.scenes.demos import finish_experiment
from gradsim_jax.sysid.quantities import MassWarning, assemble, default_theta, focused, settled_theta


def _block(masses=None, **kw):
    v, t = gs.box_tets((2, 1, 1), (0.2, 0.1, 0.1), pattern=5)
    top, par, st = gs.soft_body(v, t, pos=(0.0, 0.3, 0.0), k_mu=5e3, k_lambda=2e4, k_damp=1.0, **kw).build(
        ground=True, contact_ke=2e3, contact_kd=5.0)
    if masses is not None:
        par = replace_paths(par, {"particles.mass": jnp.asarray(masses, par.particles.mass.dtype)})
    return top, par, st


def _experiment(top, par, st, theta):
    return finish_experiment("block", top, par, st, theta, size=16, frames=2, substeps=16, frame_dt=1.0 / 30.0)


def test_masses_a_user_sets_survive_the_default_quantities():
    """On today's main the default quantities "density" and "density_field" rebuilt every mass from the lumped
    volumes: these masses (one 20 % heavier corner) came out as one density's."""
    top, par, st = _block()
    masses = np.asarray(par.particles.mass, np.float64).copy()
    masses[0] *= 1.2
    top, par, st = _block(masses)
    theta = default_theta(top, par, st)
    assert "density" not in theta and "density_field" not in theta and "fem_mu" in theta
    exp = _experiment(top, par, st, theta)
    params, _ = assemble(exp, exp.theta)
    np.testing.assert_array_equal(np.asarray(params.particles.mass), np.asarray(par.particles.mass))
    # A fit of something else keeps them too: nothing that is not free is applied unless it differs from the
    # scene; and the mass scale, when free, scales these masses (not one density's).
    exp_fit, theta_fit = focused(exp, dict(exp.theta, mass=jnp.asarray(2.0 * float(exp.theta["mass"]))), ("mass",))
    params, _ = assemble(exp_fit, theta_fit)
    np.testing.assert_allclose(np.asarray(params.particles.mass), 2.0 * np.asarray(par.particles.mass), rtol=1e-6)


def test_a_scene_of_one_density_keeps_its_density_quantities_and_a_free_mass_is_not_overridden():
    top, par, st = _block()
    theta = default_theta(top, par, st)
    assert {"density", "density_field", "mass"} <= set(theta)
    exp = _experiment(top, par, st, theta)
    doubled = dict(exp.theta, mass=jnp.asarray(2.0 * float(exp.theta["mass"])))
    # On today's main "density" (applied after "mass") put the masses back: the free mass did nothing.
    exp_fit, theta_fit = focused(exp, doubled, ("mass",))
    assert "density" not in theta_fit and "density" not in exp_fit.theta
    params, _ = assemble(exp_fit, theta_fit)
    np.testing.assert_allclose(np.asarray(params.particles.mass), 2.0 * np.asarray(par.particles.mass), rtol=1e-6)


def test_a_quantity_that_differs_from_the_scene_is_applied_and_one_a_free_quantity_supersedes_says_so():
    top, par, st = _block()
    exp = _experiment(top, par, st, default_theta(top, par, st))
    heavy = dict(exp.theta, density=jnp.asarray(1500.0))  # the caller says: density 1500, not the scene's
    kept = settled_theta(exp, heavy, ("fem_mu",))
    assert float(kept["density"]) == 1500.0 and "mass" not in kept and "fem_mu" in kept
    with pytest.warns(MassWarning, match="density = 1500 kg/m\\^3 is not fitted and sets particles.mass, which the free "
                                         "particle_mass sets: it is left out"):
        out = settled_theta(exp, dict(heavy, particle_mass=jnp.asarray(par.particles.mass)), ("particle_mass",))
    assert "density" not in out and "particle_mass" in out


def test_params_changed_after_theta_was_read_are_named():
    top, par, st = _block()
    theta = default_theta(top, par, st)
    masses = np.asarray(par.particles.mass, np.float64) * np.linspace(0.8, 1.2, par.particles.mass.shape[0])
    _, changed, _ = _block(masses)
    with pytest.warns(MassWarning, match=r"theta\['density'\] = 1000 kg/m\^3 and the scene's params.particles.mass "
                                         r"disagree"):
        _experiment(top, changed, st, theta)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MassWarning)
        _experiment(top, changed, st, default_theta(top, changed, st))  # read again: they agree


def test_warp_grid_masses_and_their_density():
    """A whole cell's mass per particle (Warp's add_soft_grid): "density" restates the scene, reads the density
    the masses were made with, and a fitted density scales them cell by cell."""
    v, t = gs.box_tets((2, 1, 1), (0.2, 0.1, 0.1), pattern=5)
    top, par, st = gs.soft_body(v, t, density=800.0, particle_volume=1e-3, k_mu=5e3, k_lambda=2e4).build()
    np.testing.assert_allclose(np.asarray(par.particles.mass), 0.8, rtol=1e-6)
    theta = default_theta(top, par, st)
    assert float(theta["density"]) == pytest.approx(800.0, rel=1e-6)
    exp = _experiment(top, par, st, theta)
    params, _ = assemble(*focused(exp, dict(exp.theta, density=jnp.asarray(1000.0)), ("density",)))
    np.testing.assert_allclose(np.asarray(params.particles.mass), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="particle_volume > 0"):
        gs.soft_body(v, t, particle_volume=0.0)
    with pytest.raises(ValueError, match="masses > 0"):
        gs.soft_body(v, t, masses=np.zeros(v.shape[0]))


def test_a_named_quantity_that_cannot_express_the_masses_warns():
    top, par, st = _block()
    masses = np.asarray(par.particles.mass, np.float64) * 1.3
    masses[2] *= 2.0
    top, par, st = _block(masses)
    with pytest.warns(MassWarning, match="density = .* cannot express the scene's masses"):
        theta = default_theta(top, par, st, ["density"])
    assert set(theta) == {"density", "push"}
    assert sysid.QUANTITIES["density"].field == "particles.mass"
