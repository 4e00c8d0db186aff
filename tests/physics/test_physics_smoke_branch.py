"""Smoke as a branch of the Topology/Params/State trees (issue 38): `simulate` steps it as `smoke_rollout` does,
beside particles without touching them, its bad values are named, and the pressure solve deflates the
constants (a float32 solve asked for more than float32 can give stalls instead of blowing up)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry import combine, particles
from gradsim_jax.geometry.smoke import box_mask, disc_mask, smoke_grid
from gradsim_jax.physics import simulate
from gradsim_jax.physics import smoke as sm
from gradsim_jax.physics import smoke_grid as sg


def _plume(**kw):
    mask = disc_mask((12, 10), (0.5, 0.15), 0.12)
    args = dict(spacing=0.1, buoyancy=2.0, inflow_rate=1.5, inflow_mask=mask, density=mask, tolerance=1e-12)
    return smoke_grid((12, 10), **{**args, **kw})


def test_simulate_steps_the_smoke_branch_as_smoke_rollout(x64):
    top, par, st = _plume().build()
    assert top.smoke.shape == (12, 10) and st.smoke.density.dtype == jnp.float64
    traj = simulate(top, par, st, frames=4, frame_dt=1 / 30, smoke_substeps=2)
    ref = sm.smoke_rollout(top.smoke, par.smoke, st.smoke, frames=4, substeps=2, frame_dt=1 / 30)
    assert traj.smoke.density.shape == (5, 12, 10)
    # The same operations in two programs: rounding (1e-16) through a solve converged to 1e-12.
    for name in ("u", "v", "density"):
        np.testing.assert_allclose(getattr(traj.smoke, name), getattr(ref, name), rtol=0, atol=1e-10)
    assert float(jnp.max(traj.smoke.density[-1])) > 0.5  # it moved: the inflow fed it, buoyancy lifted it


def test_smoke_and_particles_in_one_scene_do_not_touch(x64):
    """A falling particle and a plume in one scene: each moves exactly as in a scene of its own."""
    falling = particles([[0.0, 1.0, 0.0]], v=[[0.3, 0.0, 0.0]])
    both = combine(falling, _plume()).build()
    alone_p = falling.build()
    alone_s = _plume().build()
    run = lambda scene: simulate(*scene, frames=3, substeps=4, frame_dt=1 / 30)  # noqa: E731
    t_both, t_p, t_s = run(both), run(alone_p), run(alone_s)
    np.testing.assert_array_equal(t_both.particles.x, t_p.particles.x)
    np.testing.assert_allclose(t_both.smoke.density, t_s.smoke.density, rtol=0, atol=1e-10)
    # and the particle falls as semi-implicit Euler says: y_n = y0 - g dt^2 n (n + 1) / 2 after n steps
    n, dt = 12, 1 / 120
    np.testing.assert_allclose(t_p.particles.x[-1, 0], [0.3 * n * dt, 1.0 - 9.81 * dt ** 2 * n * (n + 1) / 2, 0.0],
                               rtol=1e-12)


def test_gradient_through_simulate_matches_finite_differences(x64):
    top, par, st = _plume().build()

    def top_smoke(buoyancy):
        p = dataclasses.replace(par, smoke=dataclasses.replace(par.smoke, buoyancy=buoyancy))
        rho = simulate(top, p, st, frames=3, frame_dt=1 / 30).smoke.density[-1]
        return jnp.sum(rho * jnp.arange(12.0)[:, None])  # the smoke's first moment in height (rows)

    b = jnp.asarray(2.0)
    grad = float(jax.grad(top_smoke)(b))
    h = 1e-4
    fd = (float(top_smoke(b + h)) - float(top_smoke(b - h))) / (2 * h)
    # central differences: truncation O(h^2 f''') ~ 1e-8 relative; the solves converge to 1e-12
    assert grad == pytest.approx(fd, rel=1e-6)
    assert abs(grad) > 1e-3


@pytest.mark.parametrize("change, message", [
    (lambda p, s: (dataclasses.replace(p, inflow_mask=np.zeros((3, 3))), s), r"Params.smoke.inflow_mask has shape"),
    (lambda p, s: (dataclasses.replace(p, buoyancy=np.nan), s), r"SmokeParams.buoyancy must be finite"),
    (lambda p, s: (dataclasses.replace(p, dissipation=-1.0), s), r"SmokeParams.dissipation must be >= 0"),
    (lambda p, s: (p, dataclasses.replace(s, density=-np.ones((12, 10)))), r"SmokeState.density\[0, 0\].*negative"),
    (lambda p, s: (p, dataclasses.replace(s, u=np.zeros((10, 12)))), r"State.smoke.u has shape \(10, 12\)"),
])
def test_bad_smoke_branches_are_named(change, message):
    piece = _plume(tolerance=1e-5)
    top, par, st = piece.smoke
    par, st = change(par, st)
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(piece, smoke=(top, par, st)).build()


def test_simulate_refuses_smoke_without_its_topology():
    top, par, st = _plume(tolerance=1e-5).build()
    with pytest.raises(ValueError, match="State.smoke.*Topology.smoke"):
        simulate(dataclasses.replace(top, smoke=None), par, st, frames=1)
    with pytest.raises(ValueError, match="smoke_substeps"):
        simulate(top, par, st, frames=1, smoke_substeps=0)


def test_float32_solve_asked_for_too_much_stalls_instead_of_blowing_up():
    """Tolerance 1e-12 in float32 (epsilon 1.2e-7): conjugate gradients run to their cap; rounding leaves a
    constant (null-space) part in the residual, which undeflated made p.Ap ~ 0 and the step huge."""
    top = sm.SmokeTopology((24, 24), spacing=1 / 24, tolerance=1e-12, max_iterations=600)
    rng = np.random.default_rng(1)
    st = sm.smoke_state(top, u=rng.normal(size=top.shape), v=rng.normal(size=top.shape))
    before = np.linalg.norm(sg.divergence(top, st.u, st.v))
    u, v = sg.project(top, st.u, st.v)
    after = np.linalg.norm(sg.divergence(top, u, v))
    assert np.all(np.isfinite(u)) and np.all(np.isfinite(v))
    # float32 rounding of the divergence of O(1) face values / h: ~ 1e-6 relative at best; allow 1e-4
    assert after <= 1e-4 * before


def test_masks_place_cells_by_their_centres():
    box = box_mask((4, 4), (0.0, 0.0), (0.5, 0.25))
    assert box.sum() == 2 and box[0, 0] == box[0, 1] == 1  # centres (0.125, 0.125) and (0.375, 0.125)
    disc = disc_mask((4, 4), (0.5, 0.5), 0.2)
    assert disc.sum() == 4 and disc[1:3, 1:3].all()  # the four centres 0.177 m from the middle
