"""No NaN or Inf in any gradient when a particle's contact with a collider starts, ends or sits exactly at the
contact distance (hypothesis over poses near every kind of collider, static and moving, issue 39's acceptance)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

from gradsim_jax.geometry import collider, combine, particles
from gradsim_jax.geometry.primitives import box_mesh
from gradsim_jax.physics import collider_distance
from gradsim_jax.physics.integrators import euler_step

_CACHE = {}


def _scene():
    """One particle and a collider of each kind, well apart; the box moves (keyframes)."""
    if not _CACHE:
        v, f = box_mesh(0.3, 0.2, 0.3)
        pieces = [collider("plane", (0.0, -2.0, 0.0)), collider("sphere", (0.0, 0.0, 0.0), radius=0.4),
                  collider("box", (2.0, 0.0, 0.0), half_extents=(0.3, 0.2, 0.4),
                           keyframes=[(0.0, (2.0, 0.0, 0.0)), (1.0, (2.0, 0.5, 0.0))]),
                  collider("capsule", (-2.0, 0.0, 0.0), radius=0.2, half_height=0.3),
                  collider("mesh", (0.0, 0.0, 2.0), vertices=v, faces=f)]
        top, par, s0 = combine(particles(np.zeros((1, 3)), mass=0.05), *pieces).build(particle_radius=0.01)

        def outcome(x, v, col, t):
            p = dataclasses.replace(par, colliders=col)
            s = dataclasses.replace(s0, particles=dataclasses.replace(s0.particles, x=x, v=v))
            s = euler_step(top, p, s, None, 1e-3, t)
            return jnp.sum(s.particles.x ** 2) + jnp.sum(s.particles.v ** 2)

        _CACHE.update(top=top, par=par, grad=jax.jit(jax.grad(outcome, argnums=(0, 1, 2))),
                      distance=jax.jit(lambda p: collider_distance(top.colliders, par.colliders, p)))
    return _CACHE["top"], _CACHE["par"], _CACHE["grad"], _CACHE["distance"]


@settings(max_examples=25, deadline=None)
@given(which=st.integers(0, 4), direction=st.tuples(*[st.floats(-1.0, 1.0)] * 3),
       gap=st.sampled_from([0.0, 1e-7, -1e-7, 1e-3, -1e-3, 0.05]), speed=st.floats(-1.0, 1.0),
       time=st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_gradients_are_finite_near_every_collider(which, direction, gap, speed, time):
    top, par, grad, distance = _scene()
    centres = np.array([[0.0, -1.5, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [-2.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    u = np.asarray(direction, np.float64)
    u = u / np.linalg.norm(u) if np.linalg.norm(u) > 1e-3 else np.array([0.0, 1.0, 0.0])
    probe = jnp.asarray((centres[which] + 0.6 * u)[None], jnp.float32)
    d, n = distance(probe)  # at the static pose: the box's first key
    on_surface = probe - d[:, which, None] * n[:, which]
    x = on_surface + (0.01 + gap) * n[:, which]  # the particle radius plus the gap off the surface
    v = speed * n[:, which]
    gx, gv, gcol = grad(x, v, par.colliders, jnp.float32(time))
    for leaf in jax.tree_util.tree_leaves((gx, gv, gcol)):
        assert np.all(np.isfinite(np.asarray(leaf)))
