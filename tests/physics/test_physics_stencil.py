"""The stencil path of a grid cloth (`physics.stencil`): found only on grids, the same forces, rollouts and
gradients as the gather path up to float round-off, and gradients against float64 finite differences."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.geometry.scene import particles
from gradsim_jax.physics.cloth import bending_force, bending_forces, membrane_forces, triangle_air_force, triangle_force
from gradsim_jax.physics.gather import gather_corners, scatter_corners
from gradsim_jax.physics.stencil import find_cloth_grid, grid_mismatch
from gradsim_jax.physics.validate import validate_scene

EPS32 = float(np.finfo(np.float32).eps)
#: s, a frame: with 8 substeps (0.52 ms) inside the scenes' stable step (0.64 ms).
FRAME_DT = 1.0 / 240.0

#: (dim_x, dim_y, reverse_winding): strips, odd sizes, both diagonal patterns.
SHAPES = [(1, 5, False), (6, 1, True), (3, 5, False), (5, 4, True)]


def _scene(dim_x, dim_y, reverse, dtype=jnp.float32, lead=0, **kw):
    """A grid cloth (left column pinned, aerodynamics on, per-triangle and per-edge coefficients that differ),
    after `lead` loose particles (so that the lattice starts at particle `lead`)."""
    cloth = gs.cloth_grid(dim_x, dim_y, 0.1, 0.12, reverse_winding=reverse, fix_left=True, tri_drag=0.3,
                          tri_lift=0.2, mass=0.05, **kw)
    if lead:
        cloth = particles(np.arange(3 * lead, dtype=float).reshape(lead, 3) + 5.0) + cloth
    top, par, st = cloth.build(dtype=dtype, aerodynamics=True)
    rng = np.random.default_rng(dim_x * 7 + dim_y)
    t, e = par.cloth.tri_ke.shape[0], par.cloth.bend_ke.shape[0]
    cloth_par = dataclasses.replace(
        par.cloth, tri_ke=par.cloth.tri_ke * jnp.asarray(rng.uniform(0.5, 1.5, t), dtype),
        tri_kd=par.cloth.tri_kd * jnp.asarray(rng.uniform(0.5, 1.5, t), dtype),
        bend_ke=jnp.asarray(rng.uniform(0.5, 1.5, e) * 0.5, dtype),
        bend_kd=jnp.asarray(rng.uniform(0.5, 1.5, e) * 1e-3, dtype))
    return top, dataclasses.replace(par, cloth=cloth_par), st


def _without_grid(top):
    return dataclasses.replace(top, cloth=dataclasses.replace(top.cloth, grid=None))


def _stencil(top, planes=None):
    """The topology on the stencil path whatever the backend (with the lattice layout `planes`)."""
    return dataclasses.replace(top, cloth=dataclasses.replace(
        top.cloth, grid=dataclasses.replace(top.cloth.grid, enabled=True, planes=planes)))


def _perturbed(st, seed, dtype):
    rng = np.random.default_rng(seed)
    x = np.asarray(st.particles.x, np.float64) + 0.02 * rng.normal(size=st.particles.x.shape)
    return jnp.asarray(x, dtype), jnp.asarray(rng.normal(size=x.shape), dtype)


@pytest.mark.parametrize("dim_x, dim_y, reverse", SHAPES)
def test_grid_cloths_are_found_with_their_families(dim_x, dim_y, reverse):
    top, _, _ = _scene(dim_x, dim_y, reverse)
    grid = top.cloth.grid
    assert grid is not None and (grid.rows, grid.cols, grid.offset) == (dim_y + 1, dim_x + 1, 0)
    assert len(grid.tri_families) == 2 and all(f.shape == (dim_y, dim_x) for f in grid.tri_families)
    # horizontal, vertical and diagonal hinges (a strip has no interior edge along its length)
    assert len(grid.bend_families) == 3 - (dim_x == 1) - (dim_y == 1)
    n = top.particles.pinned.shape[0]
    assert grid_mismatch(grid, np.asarray(top.cloth.triangles), np.asarray(top.cloth.bend_edges), n) is None


def test_meshes_that_are_no_grid_keep_the_gather_path():
    top, _, _ = _scene(4, 3, False)
    tris, edges = np.asarray(top.cloth.triangles), np.asarray(top.cloth.bend_edges)
    n = top.particles.pinned.shape[0]
    assert find_cloth_grid(tris[:-1], edges, n) is None  # a cell half empty: a family is no rectangle
    perm = np.random.default_rng(0).permutation(n)
    assert find_cloth_grid(perm[tris], perm[edges], n) is None  # particles renumbered off the lattice
    flipped = tris.copy()
    flipped[5] = flipped[5, [0, 2, 1]]  # one triangle wound the other way: a family of one
    assert find_cloth_grid(flipped, edges, n) is None
    assert find_cloth_grid(tris, edges[:-1], n) is None  # a hinge missing
    assert find_cloth_grid(np.zeros((0, 3), np.int32), edges[:0], n) is None
    # a grid described for other triangles is refused before a rollout
    wrong = dataclasses.replace(top.cloth, triangles=jnp.asarray(flipped))
    with pytest.raises(ValueError, match="Topology.cloth.grid does not match"):
        validate_scene(dataclasses.replace(top, cloth=wrong), _scene(4, 3, False)[1])


def _corner_scale(kernel, elements, x, v, n, *coefficients):
    """Per particle, the sum over its elements of the element's force scale (the sum of |corner force| over
    the element's corners, gather path)."""
    corners = [gather_corners(a, elements) for a in (x, v)]
    forces = jax.vmap(kernel)(*(c[:, k] for c in corners for k in range(elements.shape[1])), *coefficients)
    forces = forces if isinstance(forces, tuple) else (forces,) * elements.shape[1]
    scale = sum(jnp.linalg.norm(f, axis=-1) for f in forces)  # [E]
    per_corner = jnp.broadcast_to(scale[:, None, None], elements.shape + (1,))
    return scatter_corners(per_corner, elements, n)[:, 0]


@pytest.mark.parametrize("dim_x, dim_y, reverse, planes", [s + (k % 2 == 1,) for k, s in enumerate(SHAPES)])
def test_forces_equal_the_gather_path_to_float32_round_off(dim_x, dim_y, reverse, planes):
    """Both paths compute the same element forces (each within a few ulps of its element's force scale) and
    sum at most K of them per particle in two orders (each sum within (K - 1) eps of the sum of the terms'
    magnitudes): |difference| <= 4 K eps (sum over the particle's elements of their force scale)."""
    top, par, st = _scene(dim_x, dim_y, reverse, lead=2)
    assert top.cloth.grid.offset == 2
    stencil, gather = _stencil(top, planes), _without_grid(top)
    x, v = _perturbed(st, 1, jnp.float32)
    n, tris, edges = x.shape[0], top.cloth.triangles, top.cloth.bend_edges
    activation = jnp.asarray(np.random.default_rng(2).uniform(-0.1, 0.1, tris.shape[0]), jnp.float32)
    offset = jnp.asarray(np.random.default_rng(3).uniform(-0.3, 0.3, edges.shape[0]), jnp.float32)
    cp = par.cloth
    from gradsim_jax.physics.cloth import rest_shapes

    scale = jax.jit(_corner_scale, static_argnums=(0, 4))
    gram_inv, area = rest_shapes(cp.rest_x, tris)
    scale_m = scale(triangle_force, tris, x, v, n, gram_inv, area, cp.tri_ke, cp.tri_ka, cp.tri_kd,
                    cp.tri_activation + activation)
    scale_a = scale(triangle_air_force, tris, x, v, n, cp.tri_drag, cp.tri_lift)
    scale_b = scale(bending_force, edges, x, v, n, cp.bend_ke, cp.bend_kd, cp.bend_rest + offset)
    for fn, extra, scale, k in ((membrane_forces, activation, scale_m + scale_a, 6),
                                (bending_forces, offset, scale_b, 12)):
        a, b = (np.asarray(jax.jit(fn)(t, par, x, v, extra)) for t in (stencil, gather))
        tol = 4 * k * EPS32 * np.asarray(scale)[:, None]
        assert np.all(np.abs(a - b) <= tol), (fn.__name__, np.max(np.abs(a - b) - tol))
        assert np.all(a[:2] == 0.0)  # the loose particles before the lattice
        assert np.abs(b).max() > 1e-3  # the comparison is not one of zeros


def _loss(top, par, st, frames=2, substeps=4, unroll=None):
    def loss(v0, tri_ke, bend_ke):
        p = dataclasses.replace(par, cloth=dataclasses.replace(par.cloth, tri_ke=tri_ke, bend_ke=bend_ke))
        traj = gs.simulate(top, p, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps,
                           frame_dt=FRAME_DT, unroll=unroll)
        return jnp.sum(traj.particles.x[-1] ** 2) + jnp.sum(traj.particles.x[1] * traj.particles.v[1])
    return loss


def _args(par, st):
    """(v0, tri_ke, bend_ke): v0 away from 0, where the aerodynamic forces' direction of v is not smooth."""
    v0 = st.particles.v + jnp.asarray(np.random.default_rng(5).normal(size=st.particles.v.shape), st.particles.v.dtype)
    return v0, par.cloth.tri_ke, par.cloth.bend_ke


def test_rollout_equals_the_gather_path_to_round_off():
    """float64: the two paths agree to 1e-10 m; float32: they differ by no more than twice what float32 itself
    costs the gather path (its distance from the float64 rollout)."""
    with jax.enable_x64(True):
        top, par, st = _scene(5, 4, True, dtype=jnp.float64)
        run = lambda t: gs.simulate(t, par, st, frames=4, substeps=8, frame_dt=FRAME_DT).particles.x
        x64 = np.asarray(run(_without_grid(top)))
        assert np.abs(np.asarray(run(_stencil(top))) - x64).max() < 1e-10
    top, par, st = _scene(5, 4, True)
    run = lambda t: gs.simulate(t, par, st, frames=4, substeps=8, frame_dt=FRAME_DT).particles.x
    gather32, stencil32 = np.asarray(run(_without_grid(top))), np.asarray(run(_stencil(top)))
    assert np.abs(gather32 - x64).max() > 0.0
    assert np.abs(stencil32 - gather32).max() <= 2 * np.abs(gather32 - x64).max() + 4 * EPS32


def test_gradient_matches_finite_differences_and_the_gather_path(x64):
    """Reverse mode through a short rollout (the stencil path, float64) against central differences along
    random directions of the initial velocities, the per-triangle stiffness and the per-edge bending
    stiffness, and against the gather path's gradient."""
    top, par, st = _scene(3, 5, False, dtype=jnp.float64)
    top = _stencil(top, planes=True)  # the layout of an accelerator
    args = _args(par, st)
    loss = _loss(top, par, st)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*args)
    reference = jax.jit(jax.grad(_loss(_without_grid(top), par, st), argnums=(0, 1, 2)))(*args)
    for g, r in zip(grads, reference):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-9, atol=1e-12 * np.abs(r).max())
    rng = np.random.default_rng(4)
    jloss = jax.jit(loss)
    for i, (g, a) in enumerate(zip(grads, args)):
        # steps of 1e-4 of the argument's scale: the differences' round-off (eps |L| / their size, about
        # 1e-6 for the weak bending) and truncation (h^2, 1e-8) both well under rtol
        direction = jnp.asarray(rng.normal(size=a.shape)) * jnp.abs(a).max() * 1e-4
        shifted = lambda s: jloss(*(b + s * direction if j == i else b for j, b in enumerate(args)))
        fd = (shifted(1.0) - shifted(-1.0)) / 2.0
        np.testing.assert_allclose(float(jnp.sum(g * direction)), float(fd), rtol=1e-5, err_msg=f"argument {i}")


def test_unroll_gives_the_same_rollout():
    top, par, st = _scene(3, 2, False)
    top = _stencil(top)
    run = lambda u: np.asarray(gs.simulate(top, par, st, frames=2, substeps=8, frame_dt=FRAME_DT,
                                           unroll=u).particles.x)
    base = run(1)
    # XLA may fuse the unrolled substeps' arithmetic differently: equal to float32 round-off of the positions
    for unroll in (3,):
        np.testing.assert_allclose(run(unroll), base, rtol=0, atol=64 * EPS32 * np.abs(base).max())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="unroll"):
            gs.simulate(top, par, st, frames=1, substeps=2, unroll=bad)


def test_vmap_over_scenes_equals_each_scene():
    """A batch of parameters (a batched fit's) through the stencil path: each member as alone."""
    top, par, st = _scene(3, 2, False)
    loss = jax.jit(_loss(_stencil(top), par, st))
    v0, tri_ke, bend_ke = _args(par, st)
    scales = jnp.asarray([0.5, 1.0, 2.0], tri_ke.dtype)
    batched = jax.jit(jax.vmap(lambda s: loss(v0, tri_ke * s, bend_ke * s)))(scales)
    alone = np.asarray([loss(v0, tri_ke * s, bend_ke * s) for s in scales])
    np.testing.assert_allclose(np.asarray(batched), alone, rtol=64 * EPS32)
